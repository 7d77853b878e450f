// Crash safety: a writer killed with SIGKILL at a random moment (a real child process) leaves a store
// that scans clean: every block it reported done is there and whole, nothing partial is indexed,
// and its leftover temporary file is removed.
import { spawn } from 'node:child_process'
import { readFile, readdir } from 'node:fs/promises'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { listBlockDir } from '../../src/decode/store/index.ts'
import { BLOCK, bigBlockPayload, openStore, payloadDiff, tempDir, tokens } from './helpers.ts'

const writer = new URL('./fixtures/crash-writer.ts', import.meta.url).pathname
const repo = new URL('../../', import.meta.url).pathname
const COUNT = 40
const WIDTH = 32768

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({ dir, cleanup } = await tempDir()))
afterEach(async () => await cleanup())

/** Wait until `pid` is stopped (state T in /proc), so what is on disk cannot change under us. */
async function stopped (pid: number): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => null)
    if (stat === null) return await new Promise((resolve) => setTimeout(resolve, 20))
    if (/^\d+ \(.*\) [Tt] /.test(stat)) return
    await new Promise((resolve) => setTimeout(resolve, 1))
  }
}

async function hasTemp (root: string, hash: string): Promise<boolean> {
  const names = await readdir(join(root, hash[0])).catch(() => [] as string[])
  return names.some((n) => n.startsWith(`${hash}.safetensors.partial-`))
}

/**
 * Run the writer and SIGKILL it. 'inside': from block `killAt` on, as soon as a block's temporary
 * file exists, freeze the writer (SIGSTOP) and, if the file is still there, kill it mid-write; if the
 * write finished meanwhile, let it go on and try the next block. 'between': `delayMs` after block
 * `killAt` is reported done. Returns the hashes it reported done.
 */
async function killWriter (root: string, seed: number, killAt: number, when: 'inside' | 'between', delayMs: number): Promise<string[]> {
  const child = spawn(process.execPath, ['--import', 'tsx', writer, root, String(COUNT), String(seed), String(WIDTH)], { cwd: repo, stdio: ['ignore', 'pipe', 'inherit'] })
  const done: string[] = []
  let buffer = ''
  let started = 0
  let exited = false
  let hunting = false
  const closed = new Promise<void>((resolve) => child.on('close', () => { exited = true; resolve() }))
  const hunt = async (hash: string): Promise<void> => {
    hunting = true
    while (!exited && !done.includes(hash)) {
      if (await hasTemp(root, hash)) {
        child.kill('SIGSTOP')
        await stopped(child.pid as number)
        if (await hasTemp(root, hash)) {
          child.kill('SIGKILL')
          return
        }
        child.kill('SIGCONT')
        break
      }
      await new Promise((resolve) => setImmediate(resolve))
    }
    hunting = false
  }
  child.stdout.on('data', (chunk: Buffer) => {
    buffer += chunk.toString('utf8')
    const lines = buffer.split('\n')
    buffer = lines.pop() as string
    for (const line of lines) {
      const [what, hash] = line.split(' ')
      if (what === 'done') {
        done.push(hash)
        if (when === 'between' && done.length === killAt + 1) setTimeout(() => child.kill('SIGKILL'), delayMs)
      } else if (what === 'start' && when === 'inside' && started++ >= killAt && !hunting) {
        void hunt(hash)
      }
    }
  })
  await closed
  expect(child.signalCode).toBe('SIGKILL')
  return done
}

async function checkStore (root: string, seed: number, done: string[]): Promise<{ indexed: number, tempRemoved: number }> {
  const before = await listBlockDir(root)
  const { store, events } = await openStore(root)
  // Nothing partial reached a block name: every block file on disk is whole and servable.
  expect(events.filter((e) => e.kind === 'unreadable' || e.kind === 'refused')).toEqual([])
  expect(store.size).toBe(before.filter((e) => e.kind === 'block').length)
  const keys = store.keysFor(tokens(COUNT * BLOCK, seed))
  for (const hash of done) expect(keys).toContain(hash)
  for (const entry of store.entries()) {
    const b = keys.indexOf(entry.hash)
    expect(b).toBeGreaterThanOrEqual(0)
    const loaded = await store.load(entry.hash)
    expect(payloadDiff(loaded!.payload, bigBlockPayload(b, WIDTH))).toBeNull()
  }
  // Every block reported done is present, and blocks are written in order, so they form the prefix.
  expect(store.size).toBeGreaterThanOrEqual(done.length)
  expect(store.size).toBeLessThanOrEqual(done.length + 1)
  expect(new Set(store.entries().map((e) => e.hash))).toEqual(new Set(keys.slice(0, store.size)))
  // No temporary file survives the scan (its writer is dead).
  for (const sub of '0123456789abcdef') expect((await readdir(join(root, sub))).filter((n) => n.includes('.partial-'))).toEqual([])
  return { indexed: store.size, tempRemoved: store.stats.tempRemoved }
}

describe('a writer killed with SIGKILL loses no completed block and leaves nothing partial', () => {
  it('survives kills inside writes and between writes, at random moments', async () => {
    const rounds = [
      { when: 'inside' as const, killAt: Math.floor(Math.random() * 8), delayMs: 0 },
      { when: 'inside' as const, killAt: 1 + Math.floor(Math.random() * 8), delayMs: 0 },
      { when: 'between' as const, killAt: 1 + Math.floor(Math.random() * 8), delayMs: Math.floor(Math.random() * 3) },
    ]
    let cut = 0 // writes cut mid-file, reported for the record
    for (const [i, r] of rounds.entries()) {
      const root = join(dir, `round-${i}`)
      const done = await killWriter(root, i + 1, r.killAt, r.when, r.delayMs)
      const temps = (await listBlockDir(root)).filter((e) => e.kind === 'temp').length
      // An inside kill always leaves the torn write's temporary file; a between kill may (next write begun).
      if (r.when === 'inside') expect(temps).toBe(1)
      else expect(temps).toBeLessThanOrEqual(1)
      const result = await checkStore(root, i + 1, done)
      expect(result.tempRemoved).toBe(temps)
      cut += temps
    }
    const plan = rounds.map((r) => `${r.when} block ${r.killAt} +${r.delayMs} ms`).join(', ')
    console.info(`crash test: ${plan}; ${cut} write(s) cut mid-file`)
  })
})

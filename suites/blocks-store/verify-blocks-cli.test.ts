// `pd-bridge verify-blocks` run as a real child process on two stores that wrote the same prompt.
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { SafetensorsFile } from '../../src/formats/safetensors/index.ts'
import { flipTensorBit } from '../support/flip-bit.ts'
import { PLACEHOLDER, blockPath } from '../../src/decode/store/index.ts'
import { BLOCK, blockPayload, openStore, tempDir, tokens } from './helpers.ts'

const run = promisify(execFile)
const bin = new URL('../../bin/pd-bridge.mjs', import.meta.url).pathname

async function cli (...args: string[]): Promise<{ code: number, stdout: string, stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [bin, ...args])
    return { code: 0, stdout, stderr }
  } catch (err) {
    const e = err as { code: number, stdout: string, stderr: string }
    return { code: e.code, stdout: e.stdout, stderr: e.stderr }
  }
}

let dir: string
let cleanup: () => Promise<void>
let dirA: string
let dirB: string
let keys: string[]
beforeEach(async () => {
  ({ dir, cleanup } = await tempDir())
  dirA = join(dir, 'bridge')
  dirB = join(dir, 'decoder')
  const { store: a } = await openStore(dirA)
  keys = a.keysFor(tokens(3 * BLOCK))
  for (const [b, k] of keys.entries()) await a.put(k, blockPayload(b))
  // The second writer runs later, so every created_at differs.
  await new Promise((resolve) => setTimeout(resolve, 20))
  const { store: b } = await openStore(dirB)
  for (const [i, k] of keys.entries()) await b.put(k, blockPayload(i))
})
afterEach(async () => await cleanup())

async function createdAt (root: string, hash: string): Promise<string> {
  const f = await SafetensorsFile.open(blockPath(root, hash))
  try {
    return f.metadata.created_at
  } finally {
    await f.close()
  }
}

describe('identical directories', () => {
  it('prints "3/3 identical" and exits 0, although every created_at differs', async () => {
    for (const k of keys) expect(await createdAt(dirA, k)).not.toBe(await createdAt(dirB, k))
    const r = await cli('verify-blocks', dirA, dirB)
    expect(r.code).toBe(0)
    expect(r.stdout.trim().split('\n').at(-1)).toBe('3/3 identical')
    for (const k of keys) expect(r.stdout).toContain(`${k}  identical`)
  })
})

describe('one changed value', () => {
  it('names the block and the tensor, counts it, and exits 1', async () => {
    // Flip the low byte of the first element of block 1's CSA main pool rows.
    await flipTensorBit(blockPath(dirB, keys[1]), 'layer_1_sub_1_state_2')

    const r = await cli('verify-blocks', dirA, dirB)
    expect(r.code).toBe(1)
    expect(r.stdout).toContain(`${keys[1]}  DIFFERENT`)
    expect(r.stdout).toMatch(/ {2}tensor layer_1_sub_1_state_2: 1 of 16 values differ; first at element 0: A 11004, B 11004\.0009765625/)
    expect(r.stdout).toContain(`${keys[0]}  identical`)
    expect(r.stdout.trim().split('\n').at(-1)).toBe('2/3 identical')
  })
})

describe('placeholders are "no data"', () => {
  it('reports a placeholder against real state once, as a layer without data', async () => {
    const { store } = await openStore(join(dir, 'other'))
    const payloads = [blockPayload(0), blockPayload(1), blockPayload(2)]
    payloads[0].layers[2] = PLACEHOLDER
    payloads[0].layerMetaStates[2] = []
    for (const [i, k] of keys.entries()) await store.put(k, payloads[i])
    const r = await cli('verify-blocks', dirA, join(dir, 'other'))
    expect(r.code).toBe(1)
    const lines = r.stdout.split('\n')
    const at = lines.indexOf(`${keys[0]}  DIFFERENT`)
    expect(at).toBeGreaterThanOrEqual(0)
    expect(lines[at + 1]).toBe('  layer 2: A holds a CacheList of 2, B holds no data (placeholder)')
    // That is the block's only difference: layer 2's keys and tensors are not compared further.
    expect(lines[at + 2]).toMatch(/^[0-9a-f]{64} {2}identical$/)
  })
})

describe('blocks present on one side only', () => {
  it('lists them and exits 1', async () => {
    const { store } = await openStore(dirB)
    const [extra] = store.keysFor(tokens(BLOCK, 9))
    await store.put(extra, blockPayload(0))
    const r = await cli('verify-blocks', dirA, dirB)
    expect(r.code).toBe(1)
    expect(r.stdout).toContain(`${extra}  ONLY IN B`)
    expect(r.stdout.trim().split('\n').at(-1)).toBe('3/4 identical')
  })

  it('exits 1 when there is nothing to compare, and 2 for a missing directory', async () => {
    const empty = join(dir, 'empty')
    await openStore(empty)
    expect((await cli('verify-blocks', empty, empty)).code).toBe(1)
    const missing = await cli('verify-blocks', dirA, join(dir, 'nope'))
    expect(missing.code).toBe(2)
    expect(missing.stderr).toMatch(/nope: no such directory/)
  })
})

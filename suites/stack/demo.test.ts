// `pd-bridge demo` end to end as a real child process on the tiny checkpoint with a short prompt:
// the table says complete, the answers match and verify-blocks finds every block identical; every
// process is gone afterwards; a reused prompt seed runs cold again (each demo run has a block store of
// its own, so the seed README's reused-seed trap cannot happen); and with
// the prefill engine under another numerics profile the demo reports the difference and exits 1.
import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { alive, envWith, runCli, tempDir, type CliRun } from './helpers.ts'

const tmp = tempDir('stack-demo')
const state = join(tmp.dir, 'state')
const env = envWith(state)

afterAll(() => tmp.remove())

/** The value column of the table row `label`. */
function row (table: string, label: string): string {
  const line = table.split('\n').find((l) => l.startsWith(`  ${label} `))
  if (line === undefined) throw new Error(`no row ${label} in:\n${table}`)
  return line.slice(2 + label.length).trim()
}

function childPids (r: CliRun): number[] {
  return [...r.stderr.matchAll(/ready +http:\S+ +pid (\d+)/g)].map((m) => Number(m[1]))
}

describe('the demo, bridged and native', () => {
  let run: CliRun

  it('prints the table with verdict complete, matching answers and identical blocks, and exits 0', async () => {
    run = await runCli(['demo', '--tokens', '600', '--max-tokens', '12', '--prompt-seed', '7'], env)
    expect(run.code).toBe(0)
    const t = run.stdout
    const tokens = Number(row(t, 'prompt tokens').split(' ')[0].replace(/,/g, ''))
    expect(tokens).toBeGreaterThanOrEqual(600)
    expect(tokens).toBeLessThan(700)
    expect(row(t, 'prompt tokens')).toBe(`${tokens} (2 full blocks, ${tokens - 512} in the tail)`)
    expect(row(t, 'verdict')).toBe('complete (512 tokens bridged)')
    expect(row(t, 'cached tokens')).toBe('bridged 512, native 0')
    expect(row(t, 'answers match')).toMatch(/^yes: \d+ identical tokens$/)
    expect(row(t, 'verify-blocks')).toBe('2/2 identical')
    expect(row(t, 'stages (bridged)')).toMatch(/engine prefill \d+\.\d\d s/)
    expect(row(t, 'bridged time')).toMatch(/^\d+\.\d\d s through the front door$/)
    expect(row(t, 'native time')).toMatch(/^\d+\.\d\d s on a decoder with an empty block store \(bridged \/ native = \d+\.\d\d\)$/)
    expect(t.trim().split('\n').at(-1)).toBe('PASS: verdict complete, answers identical, every bridged block identical to the native decoder\'s')
  })

  it('shows plain progress lines on a non-terminal stderr, and leaves no process behind', () => {
    expect(run.stderr).not.toContain('\x1b')
    const lines = run.stderr.trim().split('\n')
    for (const l of lines) expect(l.startsWith('pd-bridge demo: ')).toBe(true)
    expect(lines).toContain('pd-bridge demo: stopping every process')
    const pids = childPids(run)
    // prefill engine, share, decoder, front door and the native leg's decoder
    expect(new Set(pids).size).toBe(5)
    for (const pid of pids) expect(alive(pid)).toBe(false)
    expect(readdirSync(state)).not.toContain('stack.json')
  })

  it('the verify-blocks command it prints passes on its own', async () => {
    const command = run.stdout.split('\n').find((l) => l.trim().startsWith('pd-bridge verify-blocks '))
    expect(command).toBeDefined()
    const [, , a, b] = (command as string).trim().split(' ')
    const r = await runCli(['verify-blocks', a, b], env)
    expect(r.code).toBe(0)
    expect(r.stdout.trim().split('\n').at(-1)).toBe('2/2 identical')
  })
})

describe('a prompt seed used before', () => {
  it('runs cold again: each demo run has a block store of its own, so a reused seed is never a warm hit', async () => {
    const r = await runCli(['demo', '--tokens', '600', '--max-tokens', '12', '--prompt-seed', '7'], env)
    expect(r.code, r.stderr).toBe(0)
    expect(row(r.stdout, 'verdict')).toBe('complete (512 tokens bridged)')
    expect(row(r.stdout, 'cached tokens')).toBe('bridged 512, native 0')
    for (const pid of childPids(r)) expect(alive(pid)).toBe(false)
  })
})

describe('a prefill engine under another numerics profile', () => {
  it('still bridges (complete), but its blocks differ from the native decoder\'s and the demo exits 1', async () => {
    const r = await runCli(['demo', '--tokens', '600', '--max-tokens', '12', '--prefill-profile', 'prefill'], env)
    expect(r.code).toBe(1)
    expect(row(r.stdout, 'model')).toContain('prefill engine profile prefill')
    expect(row(r.stdout, 'verdict')).toBe('complete (512 tokens bridged)')
    // Layer 0's attention input is the embedding in both profiles, so some tensors agree; the
    // blocks as wholes do not.
    expect(row(r.stdout, 'verify-blocks')).toBe('0/2 identical')
    expect(r.stdout.trim().split('\n').at(-1)).toMatch(/^FAIL: (the answers differ; )?2 of 2 blocks differ$/)
  })
})

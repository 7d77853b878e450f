// `pd-bridge demo --decoder llama.cpp` end to end as a real child process: the embedded stack with
// llama.cpp (node-llama-cpp on an f32 GGUF of the mirrored tiny checkpoint) as the decoder, our
// prefill engine and capture in the f32 profile, the front door writing llama.cpp's sequence state
// through the state target. The bridged answer must equal llama.cpp's own prefill of the same
// tokens (a second llama.cpp decoder with an empty store), the verdict must be complete, and the
// state the bridge built is compared with the one llama.cpp saved itself at the same boundary.
// That last comparison is across engines (llama.cpp's rope angles and sums are not ours), so it is
// measured and printed; the bound checked here (|d| < 1e-4 per section) is far above the 2e-5 seen
// and far below what a wrong row, position or rotation gives (docs/llama-cpp.md).
import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { alive, envWith, runCli, tempDir, type CliRun } from '../stack/helpers.ts'

const tmp = tempDir('llama-demo')
const state = join(tmp.dir, 'state')
const env = envWith(state)

afterAll(() => tmp.remove())

function row (table: string, label: string): string {
  const line = table.split('\n').find((l) => l.startsWith(`  ${label} `))
  if (line === undefined) throw new Error(`no row ${label} in:\n${table}`)
  return line.slice(2 + label.length).trim()
}

describe('the demo with llama.cpp as the decoder', () => {
  let run: CliRun

  it('bridges a cold prompt into llama.cpp: verdict complete, answers identical to its own prefill, exit 0', async () => {
    run = await runCli(['demo', '--decoder', 'llama.cpp', '--tokens', '600', '--max-tokens', '12', '--prompt-seed', '7'], env)
    expect(run.code, run.stderr).toBe(0)
    const t = run.stdout
    process.stdout.write(t)
    expect(row(t, 'model')).toContain('decoder llama.cpp (f32 GGUF, F32 cache)')
    expect(row(t, 'model')).toContain('prefill engine profile f32')
    expect(row(t, 'verdict')).toBe('complete (512 tokens bridged)')
    expect(row(t, 'cached tokens')).toBe('bridged 512, native 0')
    expect(row(t, 'answers match')).toMatch(/^yes: 12 identical tokens$/)
    expect(row(t, 'native time')).toMatch(/on a llama\.cpp decoder with an empty state store/)
    expect(t.trim().split('\n').at(-1)).toMatch(/^PASS: verdict complete, answers identical to llama\.cpp's own prefill/)
  })

  it('prints the state comparison section by section, every compared section within 1e-4 of llama.cpp\'s own', () => {
    const t = run.stdout
    expect(row(t, 'state vs llama.cpp')).toMatch(/^after 512 tokens, bridge-built vs llama\.cpp's own: [\d,]+\/[\d,]+ values identical/)
    const sections = t.split('\n').filter((l) => /^\s+(window|csa|hca|lid) /.test(l))
    // window x4 layers, K caches (csa x2, hca, lid x2), rings (kv and score per pool layer)
    expect(sections.length).toBe(19)
    for (const line of sections) {
      const d = Number(/\(\|d\| ([^)]+)\)/.exec(line)?.[1])
      expect(Number.isFinite(d), line).toBe(true)
      expect(d, line).toBeLessThan(1e-4)
    }
  })

  it('leaves no process behind, and the mirrored checkpoint and its GGUF in the state dir', () => {
    const pids = [...run.stderr.matchAll(/ready +http:\S+ +pid (\d+)/g)].map((m) => Number(m[1]))
    expect(new Set(pids).size).toBe(5)
    for (const pid of pids) expect(alive(pid)).toBe(false)
    const models = readdirSync(join(state, 'models'))
    expect(models).toContain('tiny-seed1-mirrored')
    expect(models).toContain('tiny-seed1-mirrored.f32.gguf')
  })

  it('refuses an unknown decoder before anything starts', async () => {
    const r = await runCli(['demo', '--decoder', 'vllm'], env)
    expect(r.code).not.toBe(0)
    expect(r.stderr).toContain('--decoder vllm: expected ours or llama.cpp')
  })
})

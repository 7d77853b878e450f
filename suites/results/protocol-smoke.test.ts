import { copyFile, mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { execa } from 'execa'
import { describe, expect, it } from 'vitest'
import { prepareBench } from '../../verify/results/bench-setup.ts'
import { readApartLegs } from '../../verify/results/apart-leg.ts'
import { readRunRecords } from '../../verify/results/record.ts'
import { HANG_LIMIT_MS } from '../support/hang-limit.ts'

const ROOT = join(import.meta.dirname, '..', '..')

describe('the cold-bench protocol, smoke run on the embedded stack', () => {
  // 600 tokens: the smallest prompt that spans the front door's minimum of two 256-token blocks,
  // so the bridge really runs (a shorter one is routed native and says so).
  it('writes one valid record per run with both legs and regenerates RESULTS.md with the micro records', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'pd-cold-bench-'))
    try {
      const runs = join(dir, 'runs')
      const out = join(dir, 'out')
      // A micro record (of another environment) in the directory given with --micro.
      const micro = join(dir, 'micro-elsewhere')
      await mkdir(micro)
      await copyFile(join(import.meta.dirname, 'fixtures', 'micro', 'c-kernels.json'), join(micro, 'c-kernels.json'))
      const r = await execa('node', ['protocols/cold-bench.mjs', '--sizes', '600', '--repeats', '1', '--seed', '7', '--state-dir', join(dir, 'state'), '--runs', runs, '--out', out, '--micro', micro], { cwd: ROOT, reject: false, timeout: HANG_LIMIT_MS })
      expect(r.exitCode, r.stderr).toBe(0)
      const records = await readRunRecords(runs)
      expect(records).toHaveLength(1)
      const rec = records[0]
      expect(rec.targetTokens).toBe(600)
      expect(rec.native).not.toBeNull()
      expect(rec.bridged?.verdict).toBe('complete')
      expect(rec.bridged?.promptTokens).toBe(rec.native?.promptTokens)
      expect(rec.answersAgree).toBe(true)
      // Both legs carry the decoder's own clock, through the front door for the bridged one.
      for (const leg of [rec.native!, rec.bridged!]) {
        expect(leg.decoderMs!.prefill).toBeGreaterThan(0)
        expect(leg.decoderMs!.decode).toBeGreaterThan(0)
        expect(leg.decoderMs!.prefill + leg.decoderMs!.decode).toBeLessThanOrEqual(leg.totalMs)
      }
      expect(Object.keys(rec.peakMemoryBytes).sort()).toEqual(['decoder', 'decoder-native', 'front', 'prefill-engine', 'protocol', 'share'])
      // The capture's peak, from the engine's own prefill-end line; staged (no PD_CAPTURE_SPILL here).
      expect(rec.bridged?.capturePeakHeldBytes).toBeGreaterThan(0)
      expect(rec.bridged?.captureSpill).toBe(false)
      const md = await readFile(join(out, 'RESULTS.md'), 'utf8')
      expect(md).toContain(`| ${rec.bridged!.promptTokens} | 1 |`)
      // It names the folders it read (--runs, --micro, needle/runs/ beside --runs), not the checkout's results/.
      expect(md).toContain(`from the records in \`${runs}/\` (cold-prompt runs), \`${micro}/\` (micro benchmarks) and \`${join(dir, 'needle', 'runs')}/\` (needle runs)`)
      expect((await readdir(out)).filter((f) => f.endsWith('.svg'))).toHaveLength(2)
      // The run's environment first (it has cold-prompt runs), then the micro-only one.
      expect(md.match(/^## Environment .*/gm)).toEqual([`## Environment ${rec.environment.id}`, '## Environment env-c7d8e9'])
      expect(md.indexOf('## Summary')).toBeLessThan(md.indexOf('## Environment '))
      expect(md).toContain(`| ${rec.environment.id} | ${rec.environment.model} | ${rec.bridged!.promptTokens} | 1 |`)
      expect(md).toContain('| matmulF32 | m=1 k=1024 n=1024 | 8 | 100.00 GFLOP/s | 500.00 GFLOP/s |')
      // A micro benchmark of the same configuration on this machine files its record under the run's environment.
      const setup = await prepareBench({ preset: 'tiny', seed: 1, blockSize: 256, prefillProfile: 'decoder' }, join(dir, 'bench'))
      expect({ ...setup.environment, commit: '' }).toEqual({ ...rec.environment, commit: '' })
    }
    finally {
      await rm(dir, { recursive: true, force: true })
    }
  })

  // --bridged-only runs no decoder-alone leg: the record has native null and no decoder-native
  // process; with PD_CAPTURE_SPILL=1 the engine streams, and the record says so with a smaller peak.
  it('--bridged-only writes bridged-only records; PD_CAPTURE_SPILL=1 streams the capture', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'pd-cold-bench-bridged-'))
    try {
      const runs = join(dir, 'runs')
      const run = async (env: Record<string, string>) => execa('node', ['protocols/cold-bench.mjs', '--sizes', '600', '--repeats', '1', '--max-tokens', '8', '--bridged-only', '--state-dir', join(dir, 'state'), '--runs', runs, '--no-generate'],
        { cwd: ROOT, reject: false, timeout: HANG_LIMIT_MS, all: true, env })
      const staged = await run({ PD_CAPTURE_SPILL: '0' })
      expect(staged.exitCode, staged.all).toBe(0)
      expect(staged.all).not.toMatch(/decoder-alone leg/)
      const streamed = await run({ PD_CAPTURE_SPILL: '1' })
      expect(streamed.exitCode, streamed.all).toBe(0)
      const records = (await readRunRecords(runs)).sort((a, b) => a.startedAt.localeCompare(b.startedAt))
      expect(records).toHaveLength(2)
      for (const rec of records) {
        expect(rec.native).toBeNull()
        expect(rec.answersAgree).toBeNull()
        expect(rec.bridged?.verdict).toBe('complete')
        expect(Object.keys(rec.peakMemoryBytes)).not.toContain('decoder-native')
      }
      expect(records.map((r) => r.bridged?.captureSpill)).toEqual([false, true])
      expect(records[1].bridged!.capturePeakHeldBytes!).toBeLessThan(records[0].bridged!.capturePeakHeldBytes!)
      // The bridged-only flag refuses a decoder-alone URL.
      const both = await execa('node', ['protocols/cold-bench.mjs', '--bridged-only', '--url', 'http://127.0.0.1:1', '--native-url', 'http://127.0.0.1:2', '--model', 'x'], { cwd: ROOT, reject: false, all: true })
      expect(both.exitCode).not.toBe(0)
      expect(both.all).toMatch(/--bridged-only runs no decoder-alone leg/)
    }
    finally {
      await rm(dir, { recursive: true, force: true })
    }
  })

  // A pair split over two invocations: --alone-only writes the decoder-alone leg to wait in legs/,
  // --pair-apart runs the bridged leg on the same prompt and writes one record with both.
  it('--alone-only then --pair-apart write one paired record; nothing waits after it', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'pd-cold-bench-apart-'))
    try {
      const runs = join(dir, 'runs')
      const legs = join(dir, 'legs')
      const bench = async (...args: string[]) => execa('node', ['protocols/cold-bench.mjs', ...args, '--state-dir', join(dir, 'state'), '--runs', runs, '--legs', legs, '--no-generate'],
        { cwd: ROOT, reject: false, timeout: HANG_LIMIT_MS, all: true })
      const alone = await bench('--sizes', '600', '--repeats', '1', '--seed', '7', '--max-tokens', '8', '--alone-only')
      expect(alone.exitCode, alone.all).toBe(0)
      expect(alone.all).not.toMatch(/warming the bridged leg|: bridged leg$/m)
      expect(await readRunRecords(runs)).toEqual([])
      const waiting = await readApartLegs(legs)
      expect(waiting).toHaveLength(1)
      const leg = waiting[0].record
      expect(leg.answerBudget).toBe(8)
      const paired = await bench('--pair-apart')
      expect(paired.exitCode, paired.all).toBe(0)
      expect(paired.all).not.toMatch(/decoder-alone leg/)
      const [rec] = await readRunRecords(runs)
      expect(rec.runId).toBe(waiting[0].file.split('/').at(-1)!.replace(/\.json$/, ''))
      expect(rec.native).toEqual({ ...leg.native, apart: { startedAt: leg.startedAt } })
      expect(rec.bridged?.verdict).toBe('complete')
      expect(rec.bridged?.promptTokens).toBe(leg.native.promptTokens)
      expect(rec.answersAgree).toBe(true)
      expect(Object.keys(rec.peakMemoryBytes)).toContain('decoder-native')
      expect(await readApartLegs(legs)).toEqual([])
      expect(await readdir(join(legs, 'paired'))).toEqual([waiting[0].file.split('/').at(-1)])
      // Nothing left to pair; and the legs' own settings are not given twice.
      const again = await bench('--pair-apart')
      expect(again.exitCode).toBe(1)
      expect(again.all).toMatch(/--pair-apart: no decoder-alone leg of environment env-\w+ at commit \w+ waits in/)
      const sized = await bench('--pair-apart', '--sizes', '600')
      expect(sized.exitCode).not.toBe(0)
      expect(sized.all).toMatch(/leave out --sizes/)
      const both = await bench('--alone-only', '--bridged-only')
      expect(both.exitCode).not.toBe(0)
      expect(both.all).toMatch(/each choose the legs: give one/)
    }
    finally {
      await rm(dir, { recursive: true, force: true })
    }
  })

  // A short prompt is routed native ("native (...)", never complete): with --stop-unless-complete
  // the run stops after its bridged leg, with no decoder-alone leg and no record.
  it('--stop-unless-complete stops at a bridged leg that is not complete, writing no record', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'pd-cold-bench-stop-'))
    try {
      const runs = join(dir, 'runs')
      const r = await execa('node', ['protocols/cold-bench.mjs', '--sizes', '200', '--repeats', '1', '--seed', '7', '--stop-unless-complete', '--state-dir', join(dir, 'state'), '--runs', runs, '--no-generate'], { cwd: ROOT, reject: false, timeout: HANG_LIMIT_MS, all: true })
      expect(r.exitCode, r.all).toBe(1)
      expect(r.all).toMatch(/the bridged leg's verdict is "[^"]+", not complete/)
      expect(r.all).not.toMatch(/\[1\/1\] {3}decoder-alone leg/)
      expect(await readRunRecords(runs)).toEqual([])
    }
    finally {
      await rm(dir, { recursive: true, force: true })
    }
  })
})

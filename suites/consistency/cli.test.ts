// `pd-bridge gate` and protocols/window-gate.mjs as real child processes on a real deployment: exit
// 0 and a PASS verdict last when consistent (with a needle record under its geometry); exit 1, the
// field named and a FAIL verdict last, plus the plots beside the report, when the sidecar is stale
// (and the needle record made before is no evidence for it); exit 1 without needle evidence.
import { execFile } from 'node:child_process'
import { readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { makeDeployment, type Deployment } from './helpers.ts'

const run = promisify(execFile)
const bin = new URL('../../bin/pd-bridge.mjs', import.meta.url).pathname
const protocol = new URL('../../protocols/window-gate.mjs', import.meta.url).pathname

let d: Deployment
beforeAll(async () => { d = await makeDeployment('cli') })
afterAll(async () => await d.cleanup())

async function node (args: string[]): Promise<{ code: number, stdout: string, stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, args, { cwd: d.root })
    return { code: 0, stdout, stderr }
  }
  catch (err) {
    const e = err as { code: number, stdout: string, stderr: string }
    return { code: e.code, stdout: e.stdout, stderr: e.stderr }
  }
}

const places = () => ['--launch', d.launchFile, '--prefill-config', d.prefillConfig, '--sidecar', d.sidecarDir, '--decoder-config', d.decoderConfig]
const evidence = () => ['--needle-record', ...d.needleEvidence()]
const lastLine = (text: string) => text.trimEnd().split('\n').at(-1)

describe('pd-bridge gate', () => {
  it('passes a consistent deployment: exit 0, N/N bit-exact, the verdict last, the report written', async () => {
    const r = await node([bin, 'gate', ...places(), '--store', d.storeDir, ...evidence(), '--report-dir', 'rep-ok'])
    expect(r.stderr).toBe('')
    expect(r.code).toBe(0)
    expect(r.stdout).toContain('32/32 bit-exact on a 1,088-token prompt')
    expect(r.stdout).toMatch(/ok {3}needle {4}\S+\.json: bridged pass above the native window: seed 4242, 1,790-token prompt, the asked needle "amber" at position 1,533, past the native window 1,024/)
    expect(lastLine(r.stdout)).toMatch(/^gate: PASS \(\d+ checks passed, 0 warning\(s\), 0 skipped\)$/)
    expect((await readdir(join(d.root, 'rep-ok'))).sort()).toEqual(['report.json', 'report.md'])
    const json = JSON.parse(await readFile(join(d.root, 'rep-ok', 'report.json'), 'utf8'))
    expect(json.verdict.pass).toBe(true)
    expect(json.needle.runs.map((x: { status: string }) => x.status)).toEqual(['pass'])
  })

  it('fails a stale sidecar: exit 1, the sidecar\'s field named, plots next to the report, the verdict last', async () => {
    // A needle record of the consistent deployment, then the sidecar goes stale: the record no longer counts.
    const before = evidence()
    await d.exportSidecarFrom((json) => { json.rope_parameters.compress.factor = 16 })
    try {
      const r = await node([bin, 'gate', ...places(), ...before, '--report-dir', 'rep-stale', '--seed', '12345'])
      expect(r.code).toBe(1)
      expect(r.stdout).toContain(`FAIL rope      ${join(d.sidecarDir, 'sidecar.json')} ropeParameters.compressed_sparse_attention.factor: is 16 (sidecar) but 32 in launch, prefill, decoder`)
      expect(r.stdout).toMatch(/FAIL native .*bit-exact on a 1,088-token prompt \(seed 12345\)/)
      expect(r.stdout).toMatch(/FAIL needle {4}\S+\.json: no evidence for the needle law: seed 4242, .*: recorded under geometry [0-9a-f]{16} .*never counts/)
      expect(lastLine(r.stdout)).toBe(`gate: FAIL (4 failure(s); first: ${join(d.sidecarDir, 'sidecar.json')} ropeParameters.compressed_sparse_attention.factor)`)
      expect((await readdir(join(d.root, 'rep-stale'))).sort()).toEqual([
        'report.json', 'report.md', 'rope-compressed_sparse_attention-sidecar.svg', 'rope-heavily_compressed_attention-sidecar.svg',
      ])
      expect(r.stdout).toContain(`plot: ${join(d.root, 'rep-stale', 'rope-compressed_sparse_attention-sidecar.svg')}`)
    }
    finally {
      await d.exportSidecarFrom(() => {})
    }
  })

  it('refuses a missing required option or a bad number without running', async () => {
    const missing = await node([bin, 'gate', '--prefill-config', d.prefillConfig])
    expect(missing.code).toBe(2)
    expect(missing.stderr).toBe('pd-bridge: --launch is required (or --config with a launch.env beside it, as the embedded stack writes)\n')
    const bad = await node([bin, 'gate', ...places(), '--native-tokens', '10x', '--no-report'])
    expect(bad.code).toBe(2)
    expect(bad.stderr).toBe('pd-bridge: --native-tokens must be a positive integer, got "10x"\n')
    const seed = await node([bin, 'gate', ...places(), '--needle-url', 'http://127.0.0.1:9', '--needle-seed', '1.5', '--no-report'])
    expect(seed.code).toBe(2)
    expect(seed.stderr).toBe('pd-bridge: --needle-seed must be a non-negative integer, got "1.5"\n')
  })
})

describe('pd-bridge gate --needle-url', () => {
  it('a front door that does not answer: exit 1, the needle finding says so', async () => {
    const r = await node([bin, 'gate', ...places(), '--needle-url', 'http://127.0.0.1:9', '--no-report'])
    expect(r.code).toBe(1)
    expect(r.stdout).toContain('warn needle    http://127.0.0.1:9: http://127.0.0.1:9/health reports no geometry (links.store.geometry_fingerprint); the run is filed under the gate\'s own key ')
    expect(r.stdout).toContain('FAIL needle    http://127.0.0.1:9: no live needle run: bridged leg: http://127.0.0.1:9/v1/chat/completions did not answer: ')
    expect(lastLine(r.stdout)).toBe('gate: FAIL (1 failure(s); first: http://127.0.0.1:9)')
  })

  it('--needle-tokens too short to put the needle past the native window: no run, the reason in numbers', async () => {
    const r = await node([bin, 'gate', ...places(), '--needle-url', 'http://127.0.0.1:9', '--needle-tokens', '1200', '--no-report'])
    expect(r.code).toBe(1)
    expect(r.stdout).toContain('FAIL needle    http://127.0.0.1:9: no live needle run: a 1,200-token document keeps its needle at least 257 tokens from the end, so at or before position 943: not past the native window 1,024; give --needle-tokens of at least 1,281')
  })
})

describe('protocols/window-gate.mjs', () => {
  it('exit 0 and a PASS line for a consistent deployment', async () => {
    const r = await node([protocol, ...places(), ...evidence(), '--report-dir', 'proto-ok'])
    expect(r.code).toBe(0)
    expect(r.stdout).toMatch(/^ {2}PASS {2}pd-bridge gate \([\d.]+ s\): gate: PASS/m)
    expect(lastLine(r.stdout)).toBe('window gate: PASS')
  })

  it('no needle evidence is not a pass', async () => {
    const r = await node([protocol, ...places(), '--report-dir', 'proto-no-needle'])
    expect(r.code).toBe(1)
    expect(r.stdout).toContain('\n        no needle pass through the bridge above the native window; give --needle-url or --needle-record\n')
    expect(lastLine(r.stdout)).toBe('window gate: FAIL')
  })

  it('a skipped bridge-vs-native check is not a pass', async () => {
    const r = await node([protocol, ...places(), ...evidence(), '--no-native', '--report-dir', 'proto-skip'])
    expect(r.code).toBe(1)
    expect(r.stdout).toContain('the bridge-vs-native check was skipped (--no-native): a window change needs it')
    expect(lastLine(r.stdout)).toBe('window gate: FAIL')
  })

  it('exit 1, the failing finding and a FAIL line when one place is off', async () => {
    await d.writeLaunch({ PD_ROPE_FACTOR: '16' })
    try {
      const r = await node([protocol, ...places(), '--no-native', '--report-dir', 'proto-bad'])
      expect(r.code).toBe(1)
      expect(r.stdout).toContain(`${d.launchFile} PD_ROPE_FACTOR: is 16 (launch) but 32 in prefill, sidecar, decoder`)
      expect(lastLine(r.stdout)).toBe('window gate: FAIL')
    }
    finally {
      await d.writeLaunch()
    }
  })
})

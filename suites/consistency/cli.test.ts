// `pd-bridge gate` and protocols/window-gate.mjs as real child processes on a real deployment: exit
// 0 and a PASS verdict last when consistent; exit 1, the field named and a FAIL verdict last, plus
// the plots beside the report, when the sidecar is stale.
import { execFile } from 'node:child_process'
import { readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { makeDeployment, type Deployment } from './helpers.ts'

const run = promisify(execFile)
const bin = new URL('../../src/cli/pd-bridge.mjs', import.meta.url).pathname
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
const lastLine = (text: string) => text.trimEnd().split('\n').at(-1)

describe('pd-bridge gate', () => {
  it('passes a consistent deployment: exit 0, N/N bit-exact, the verdict last, the report written', async () => {
    const r = await node([bin, 'gate', ...places(), '--store', d.storeDir, '--report-dir', 'rep-ok'])
    expect(r.stderr).toBe('')
    expect(r.code).toBe(0)
    expect(r.stdout).toContain('32/32 bit-exact on a 1,088-token prompt')
    expect(lastLine(r.stdout)).toMatch(/^gate: PASS \(\d+ checks passed, 0 warning\(s\), 0 skipped\)$/)
    expect((await readdir(join(d.root, 'rep-ok'))).sort()).toEqual(['report.json', 'report.md'])
    const json = JSON.parse(await readFile(join(d.root, 'rep-ok', 'report.json'), 'utf8'))
    expect(json.verdict.pass).toBe(true)
  })

  it('fails a stale sidecar: exit 1, the sidecar\'s field named, plots next to the report, the verdict last', async () => {
    await d.exportSidecarFrom((json) => { json.rope_parameters.compress.factor = 16 })
    try {
      const r = await node([bin, 'gate', ...places(), '--report-dir', 'rep-stale', '--seed', '12345'])
      expect(r.code).toBe(1)
      expect(r.stdout).toContain(`FAIL rope      ${join(d.sidecarDir, 'sidecar.json')} ropeParameters.compressed_sparse_attention.factor: is 16 (sidecar) but 32 in launch, prefill, decoder`)
      expect(r.stdout).toMatch(/FAIL native .*bit-exact on a 1,088-token prompt \(seed 12345\)/)
      expect(lastLine(r.stdout)).toBe(`gate: FAIL (3 failure(s); first: ${join(d.sidecarDir, 'sidecar.json')} ropeParameters.compressed_sparse_attention.factor)`)
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
    expect(missing.code).not.toBe(0)
    expect(missing.stderr).toContain('--launch <file>')
    const bad = await node([bin, 'gate', ...places(), '--native-tokens', '10x', '--no-report'])
    expect(bad.code).toBe(2)
    expect(bad.stderr).toBe('pd-bridge: --native-tokens must be a positive integer, got "10x"\n')
  })
})

describe('protocols/window-gate.mjs', () => {
  it('exit 0 and a PASS line for a consistent deployment', async () => {
    const r = await node([protocol, ...places(), '--report-dir', 'proto-ok'])
    expect(r.code).toBe(0)
    expect(r.stdout).toMatch(/^ {2}PASS {2}pd-bridge gate \([\d.]+ s\): gate: PASS/m)
    expect(lastLine(r.stdout)).toBe('window gate: PASS')
  })

  it('a skipped bridge-vs-native check is not a pass', async () => {
    const r = await node([protocol, ...places(), '--no-native', '--report-dir', 'proto-skip'])
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

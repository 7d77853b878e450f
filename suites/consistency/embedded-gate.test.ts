// The window gate as a CI step on the embedded deployment, run as a user's CI runs it:
// `node protocols/window-gate.mjs --embedded --state-dir S`. From a fresh state directory, with no
// prior serve, it starts the stack itself (preset needle: tiny's geometry, weights that retrieve),
// runs its own needle through the front door, passes, and stops everything. With a serve running
// from the same directory and the sidecar there re-exported under the pre-change compress YaRN
// factor 16, it gates that running stack and fails, naming the sidecar's factor.
import { existsSync } from 'node:fs'
import { mkdir, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { execa } from 'execa'
import { afterAll, describe, expect, it } from 'vitest'
import { exportWeights } from '../../src/capture/index.ts'
import { HANG_LIMIT_MS } from '../support/hang-limit.ts'
import { alive, envWith, startServe, tempDir, type ServeChild } from '../stack/helpers.ts'

const ROOT = join(import.meta.dirname, '..', '..')
const tmp = tempDir('embedded-gate')
const state = join(tmp.dir, 'state')
const env = envWith(state)
let serve: ServeChild | undefined

afterAll(async () => {
  if (serve !== undefined && serve.child.exitCode === null && serve.child.signalCode === null) {
    serve.child.kill('SIGTERM')
    await serve.exited
  }
  tmp.remove()
})

async function windowGate (...args: string[]) {
  return await execa(process.execPath, [join(ROOT, 'protocols', 'window-gate.mjs'), ...args], { cwd: tmp.dir, env, reject: false, timeout: HANG_LIMIT_MS })
}

const lastLine = (text: string): string | undefined => text.trimEnd().split('\n').at(-1)

describe('window-gate --embedded', () => {
  it('passes a consistent embedded deployment from a fresh state directory: the stack started for it, its own needle retrieved, everything stopped', async () => {
    expect(existsSync(state)).toBe(false)
    const r = await windowGate('--embedded', '--state-dir', state)
    expect(r.exitCode, `${r.stdout}\n${r.stderr}`).toBe(0)
    expect(lastLine(r.stdout)).toBe('window gate: PASS')
    expect(r.stdout).toMatch(/^ {2}PASS {2}pd-bridge gate \([\d.]+ s\): gate: PASS/m)
    // The self-run needle is named, with its bound: a bridged pass above the native window.
    expect(r.stdout).toMatch(/needle pass: http:\/\/127\.0\.0\.1:\d+: bridged pass above the native window: seed \d+, 1,7\d\d-token prompt, .*verdict complete, answered " \w+"; .*; self-run: no --needle-record or --needle-url was given, so the gate ran one needle document through the deployment's own front door http:\/\/127\.0\.0\.1:\d+, each leg bounded at 600 s/)
    expect(r.stderr).toContain(`window gate: no stack runs from ${state}; starting the embedded stack (preset needle) there`)
    expect(r.stderr).toContain('window gate: embedded stack stopped')
    // The config the gate read is the one the stack wrote; the stack is gone, its record removed.
    expect(JSON.parse(await readFile(join(state, 'run', 'front.json'), 'utf8')).decoder.modelName).toBe('pd-bridge-needle-seed1')
    expect(existsSync(join(state, 'stack.json'))).toBe(false)
    const pids = [.../\(pids ([^)]+)\)/.exec(r.stderr)![1].matchAll(/ (\d+)/g)].map((m) => Number(m[1]))
    expect(pids).toHaveLength(4)
    for (const pid of pids) expect(alive(pid)).toBe(false)
    // The report and the needle's run record are in the state directory's gate-reports/.
    const [report] = await readdir(join(state, 'gate-reports'))
    const json = JSON.parse(await readFile(join(state, 'gate-reports', report, 'report.json'), 'utf8'))
    expect(json.verdict.pass).toBe(true)
    expect(json.needle.runs.map((x: { status: string }) => x.status)).toEqual(['pass'])
    expect(await readdir(join(state, 'gate-reports', report, 'needle-runs'))).toHaveLength(1)
  })

  it('fails the running serve of that state directory once its sidecar is re-exported under the stale compress factor 16', async () => {
    serve = await startServe(['--preset', 'needle', '--port', '0'], env)
    // The sidecar exported from the prefill node's pre-change config (factor 16 instead of 32).
    const model = join(state, 'models', 'needle-seed1')
    const stale = join(tmp.dir, 'stale-model')
    await mkdir(stale)
    for (const name of await readdir(model)) if (name !== 'config.json') await symlink(join(model, name), join(stale, name))
    const config = JSON.parse(await readFile(join(model, 'config.json'), 'utf8'))
    config.rope_parameters.compress.factor = 16
    await writeFile(join(stale, 'config.json'), JSON.stringify(config, null, 2))
    const sidecar = join(state, 'sidecars', 'needle-seed1-decoder-bs256')
    await rm(sidecar, { recursive: true })
    await exportWeights({ model: stale, profile: 'decoder', out: sidecar, blockSize: 256 })

    const r = await windowGate('--embedded', '--state-dir', state)
    expect(r.exitCode, `${r.stdout}\n${r.stderr}`).toBe(1)
    expect(lastLine(r.stdout)).toBe('window gate: FAIL')
    expect(r.stderr).toContain(`window gate: gating the stack running from ${state} (pid ${serve.child.pid}, preset needle, front door ${serve.ready.front})`)
    expect(r.stdout).toContain(`${join(sidecar, 'sidecar.json')} ropeParameters.compressed_sparse_attention.factor: is 16 (sidecar) but 32 in launch, prefill, decoder`)
    // The running serve is the gate's subject, not its to stop.
    expect((await fetch(`${serve.ready.front}/health`)).status).toBe(200)
  })

  it('refuses a deployment file beside --embedded, and --preset without it, in one line (exit 2)', async () => {
    const withConfig = await windowGate('--embedded', '--config', join(state, 'run', 'front.json'), '--state-dir', state)
    expect(withConfig.exitCode).toBe(2)
    expect(withConfig.stderr.trim()).toBe('window-gate: pd-bridge: --config does not go with --embedded: the gate finds the embedded deployment\'s files in the state directory')
    const preset = await windowGate('--preset', 'tiny', '--config', join(state, 'run', 'front.json'), '--state-dir', state)
    expect(preset.exitCode).toBe(2)
    expect(preset.stderr.trim()).toBe('window-gate: pd-bridge: --preset goes with --embedded (the preset of the stack the gate starts)')
  })
})

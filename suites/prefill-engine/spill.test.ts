// `pd-bridge prefill-engine --spill-capture` (and PD_CAPTURE_SPILL=1) as real child processes: a
// streaming engine's capture of a prompt is byte for byte a staged engine's, it leaves no spill
// directory, it logs the capture's peak held bytes (smaller than the staged one's), and a bad
// PD_CAPTURE_SPILL stops the engine with an error naming it.
import { readFile, readdir } from 'node:fs/promises'
import { join } from 'node:path'
import { execa } from 'execa'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { SPILL_DIR } from '../../src/capture/spill.ts'
import { readManifest } from '../../src/wire/manifest.ts'
import { BIN, exists, pollUntil, startEngine, submit, tempDir, tinyCheckpoint, tinySidecar, type EngineProcess } from './helpers.ts'

const tmp = tempDir('prefill-spill')
let model: string
let sidecar: { dir: string, fingerprint: string }
const engines: EngineProcess[] = []

beforeAll(async () => {
  model = await tinyCheckpoint()
  sidecar = await tinySidecar()
})
afterAll(async () => {
  for (const e of engines) {
    if (e.child.exitCode === null) {
      e.child.kill('SIGKILL')
      await e.exited
    }
  }
  tmp.remove()
})

const tokens = Array.from({ length: 700 }, (_, i) => (i * 131 + 29) % 512)

async function captureWith (name: string, args: string[], env: Record<string, string> = {}) {
  const root = join(tmp.dir, name)
  const engine = await startEngine(['--model', model, '--sidecar', sidecar.dir, '--capture-root', root, '--max-chunk', '64', ...args], env)
  engines.push(engine)
  expect((await submit(engine.url, { request_id: 'r1', tokens })).status).toBe(202)
  expect(await pollUntil(engine.url, 'r1')).toMatchObject({ state: 'done', sealed_length: 700 })
  const dir = join(root, 'r1')
  const m = await readManifest(dir)
  const files = await Promise.all(m.layers.map(async (l) => readFile(join(dir, l.file))))
  engine.child.kill('SIGTERM')
  await engine.exited
  const end = engine.events().filter((e) => e.event === 'prefill-end')
  return { dir, files, entries: await readdir(dir), peak: end.at(-1)?.capture_peak_held_bytes as number | undefined }
}

describe('a streaming prefill engine', () => {
  it('writes the staged engine\'s files byte for byte, keeps no spill, and holds less', async () => {
    const staged = await captureWith('staged', [])
    const flag = await captureWith('flag', ['--spill-capture'])
    const env = await captureWith('env', [], { PD_CAPTURE_SPILL: '1' })
    for (const streamed of [flag, env]) {
      expect(streamed.files.length).toBe(4)
      streamed.files.forEach((f, i) => expect(Buffer.compare(f, staged.files[i]), `layer ${i}`).toBe(0))
      expect(exists(join(streamed.dir, SPILL_DIR))).toBe(false)
      expect(streamed.entries.sort()).toEqual(staged.entries.sort())
      expect(streamed.peak).toBeGreaterThan(0)
      expect(streamed.peak).toBeLessThan(staged.peak as number)
    }
  })

  it('refuses a PD_CAPTURE_SPILL that is not 1, true, 0 or false', async () => {
    const r = await execa('node', [BIN, 'prefill-engine', '--model', model, '--sidecar', sidecar.dir, '--capture-root', join(tmp.dir, 'bad')], {
      env: { PD_CAPTURE_SPILL: 'yes' }, reject: false, timeout: 60_000,
    })
    expect(r.exitCode).not.toBe(0)
    expect(r.stderr).toMatch(/PD_CAPTURE_SPILL/)
  })
})

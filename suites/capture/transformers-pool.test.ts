// `pd-bridge export-weights` and `pd-bridge pool` as child processes, against transformers: the fp32
// attention inputs of harness/fixtures/ref-tiny-t301-f32.safetensors pooled with an `f32` export
// match transformers' fp32 caches in the fixture within relative error 1e-5 per tensor (both sides
// are fp32 but sum in different orders and use different exp/rsqrt, so bits cannot agree; the
// engine's own parity is ~1e-6, docs/engine.md). The fixture's checkpoint digest is checked first.
import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { readSafetensors, viewAs, type Tensor } from '../../src/formats/safetensors/index.ts'
import { checkpointDigest } from '../../src/model/checkpoint/index.ts'
import { tinySetup, type TinySetup } from './helpers.ts'

const run = promisify(execFile)
const bin = new URL('../../bin/pd-bridge.mjs', import.meta.url).pathname
const fixture = new URL('../../harness/fixtures/ref-tiny-t301-f32.safetensors', import.meta.url).pathname
const TOLERANCE = 1e-5

async function cli (...args: string[]): Promise<{ code: number, stdout: string, stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [bin, ...args])
    return { code: 0, stdout, stderr }
  }
  catch (err) {
    const e = err as { code: number, stdout: string, stderr: string }
    return { code: e.code, stdout: e.stdout, stderr: e.stderr }
  }
}

function relError (a: Float32Array, ref: Float32Array): number {
  let d = 0
  let r = 0
  for (let i = 0; i < a.length; i++) {
    d += (a[i] - ref[i]) ** 2
    r += ref[i] ** 2
  }
  return r === 0 ? (d === 0 ? 0 : Infinity) : Math.sqrt(d / r)
}

let setup: TinySetup
let ref: { metadata: Record<string, string>, tensors: Map<string, Tensor> }
let oneShot: Map<string, Tensor>
let chunked: Map<string, Tensor>

beforeAll(async () => {
  setup = await tinySetup('pool-cli')
  ref = await readSafetensors(fixture)
})
afterAll(() => setup.dispose())

describe('the fixture describes today\'s tiny seed-1 checkpoint', () => {
  it('checkpoint digest matches', async () => {
    const digest = await checkpointDigest(setup.ckptDir)
    expect(ref.metadata.checkpoint_sha256, 'ref-tiny-t301-f32 was made from another checkpoint than make-checkpoint --preset tiny --seed 1 writes now: re-make the fixtures (harness/make-reference-fixtures.sh)').toBe(digest)
  })
})

describe('export-weights then pool, as child processes', () => {
  it('export-weights --profile f32 writes a sidecar and prints its fingerprint', async () => {
    const r = await cli('export-weights', '--model', setup.ckptDir, '--profile', 'f32', '--out', join(setup.root, 'sidecar'))
    expect(r.stderr).toBe('')
    expect(r.code).toBe(0)
    expect(r.stdout).toMatch(/profile f32, cache math decoder, 4 layers, 28 tensors/)
    expect(r.stdout).toMatch(/fingerprint [0-9a-f]{64}/)
    expect(existsSync(join(setup.root, 'sidecar', 'sidecar.json'))).toBe(true)
  })

  it('pool one-shot and pool --chunk 7 both succeed', async () => {
    for (const [out, extra] of [['oneshot.safetensors', []], ['chunk7.safetensors', ['--chunk', '7']]] as const) {
      const r = await cli('pool', '--sidecar', join(setup.root, 'sidecar'), '--attn-inputs', fixture, '--out', join(setup.root, out), ...extra)
      expect(r.stderr).toBe('')
      expect(r.code).toBe(0)
      expect(r.stdout).toMatch(/32 tensors, T=301, 4 layers/)
    }
    oneShot = (await readSafetensors(join(setup.root, 'oneshot.safetensors'))).tensors
    chunked = (await readSafetensors(join(setup.root, 'chunk7.safetensors'))).tensors
  })
})

describe('pool output == transformers\' caches within 1e-5 (every cache tensor of the fixture)', () => {
  it.each(['oneshot', 'chunked'])('against the fixture\'s %s caches', (which) => {
    const names = [...ref.tensors.keys()].filter((n) => n.startsWith(`${which}.layers.`) && !n.endsWith('.attn_input'))
    expect(names.length).toBe(32)
    let worst = 0
    for (const name of names) {
      const ours = oneShot.get(name.replace(/^chunked\./, 'oneshot.'))
      expect(ours, name).toBeDefined()
      const theirs = ref.tensors.get(name)!
      expect(ours!.shape, name).toEqual(theirs.shape)
      expect(ours!.dtype, name).toBe(theirs.dtype)
      if (theirs.dtype === 'I64') {
        expect(viewAs(ours!, 'I64')[0], name).toBe(viewAs(theirs, 'I64')[0])
        continue
      }
      const e = relError(viewAs(ours!, 'F32'), viewAs(theirs, 'F32'))
      expect(e, name).toBeLessThanOrEqual(TOLERANCE)
      worst = Math.max(worst, e)
    }
    console.log(`pool vs transformers fp32 (${which} caches): ${names.length} tensors, worst relative error ${worst.toExponential(2)}`)
  })

  it('pool --chunk 7 output is bit-identical to one-shot', () => {
    expect([...chunked.keys()].sort()).toEqual([...oneShot.keys()].sort())
    for (const [name, t] of oneShot) expect(Buffer.compare(Buffer.from(chunked.get(name)!.data), Buffer.from(t.data)), name).toBe(0)
  })
})

describe('pool refuses bad input with a sentence, exit code 2', () => {
  it('a file without attention inputs', async () => {
    const r = await cli('pool', '--sidecar', join(setup.root, 'sidecar'), '--attn-inputs', join(setup.root, 'oneshot.safetensors'), '--out', join(setup.root, 'x.safetensors'))
    expect(r.code).toBe(2)
    expect(r.stderr).toMatch(/no tensor oneshot\.layers\.0\.attn_input/)
    expect(r.stderr).not.toContain('    at ')
  })

  it('an existing --out without --force, and a bad --chunk', async () => {
    const exists = await cli('pool', '--sidecar', join(setup.root, 'sidecar'), '--attn-inputs', fixture, '--out', join(setup.root, 'oneshot.safetensors'))
    expect(exists.code).toBe(2)
    expect(exists.stderr).toMatch(/already exists \(use --force/)
    const chunk = await cli('pool', '--sidecar', join(setup.root, 'sidecar'), '--attn-inputs', fixture, '--out', join(setup.root, 'y.safetensors'), '--chunk', '0')
    expect(chunk.code).toBe(2)
    expect(chunk.stderr).toMatch(/--chunk must be a positive integer, got "0"/)
  })

  it('a directory that is not a sidecar', async () => {
    const r = await cli('pool', '--sidecar', setup.ckptDir, '--attn-inputs', fixture, '--out', join(setup.root, 'z.safetensors'))
    expect(r.code).toBe(2)
    expect(r.stderr).toMatch(/sidecar\.json: \(file\): missing/)
  })

  it('export-weights with an unknown profile', async () => {
    const r = await cli('export-weights', '--model', setup.ckptDir, '--profile', 'mlx', '--out', join(setup.root, 'bad'))
    expect(r.code).toBe(2)
    expect(r.stderr).toMatch(/unknown numerics profile "mlx"/)
  })
})

// `pd-bridge dump` as a real child process on the tiny seed-1 checkpoint, compared with the
// transformers fp32 reference dump of the same prompt (harness/fixtures/ref-tiny-t301-f32), every
// tensor by name. Floats within 1e-5 relative (||ours - ref|| / ||ref||): both sides are fp32 but
// sum in different orders and use different exp/rsqrt, so bits cannot agree (measured ~1e-6, see
// docs/engine.md); integers (entry counts, input_ids, greedy tokens) must be identical.
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { viewAs, type Tensor } from '../../src/formats/safetensors/index.ts'
import { getProfile, profileFingerprint } from '../../src/model/profiles/index.ts'
import { relError } from '../engine/helpers.ts'
import { cli, fixturePath, readDump, scratchWithTinyCheckpoint, type CliResult } from './helpers.ts'

const TOLERANCE = 1e-5
const REFERENCE = fixturePath('ref-tiny-t301-f32.safetensors')

let scratch: Awaited<ReturnType<typeof scratchWithTinyCheckpoint>>
let run: CliResult
let ours: Awaited<ReturnType<typeof readDump>>
let theirs: Awaited<ReturnType<typeof readDump>>

beforeAll(async () => {
  scratch = await scratchWithTinyCheckpoint('parity')
  const out = join(scratch.dir, 'dump.safetensors')
  run = await cli('dump', '--model', scratch.model, '--tokens', fixturePath('tokens-301.json'), '--profile', 'f32',
    '--split', '130', '--greedy', '12', '--out', out)
  if (run.code !== 0) throw new Error(`pd-bridge dump failed (${run.code}): ${run.stderr}`)
  ours = await readDump(out)
  theirs = await readDump(REFERENCE)
})
afterAll(() => scratch?.dispose())

/** A tensor's class: its name without the pass prefix and layer index (e.g. `indexer.overlap_kv`). */
function tensorClass (name: string): string {
  return name.replace(/^(oneshot|chunked)\./, '').replace(/^layers\.\d+\./, '')
}

function floats (t: Tensor): Float32Array {
  return viewAs(t, 'F32')
}

describe('the reference describes the checkpoint make-checkpoint writes today', () => {
  it('the fresh checkpoint digest equals the fixture checkpoint_sha256, and the dump records it', () => {
    expect(theirs.metadata.checkpoint_sha256, 'ref-tiny-t301-f32 was made from another checkpoint: re-make the fixtures (harness/make-reference-fixtures.sh)').toBe(scratch.digest)
    expect(ours.metadata.checkpoint_sha256).toBe(scratch.digest)
  })
})

describe('the dump writes the same tensor names, dtypes and shapes as transformers', () => {
  it('identical name sets (76 tensors), each with the reference dtype and shape', () => {
    expect([...ours.tensors.keys()].sort()).toEqual([...theirs.tensors.keys()].sort())
    expect(ours.tensors.size).toBe(76)
    for (const [name, ref] of theirs.tensors) {
      const t = ours.tensors.get(name)!
      expect(t.dtype, name).toBe(ref.dtype)
      expect(t.shape, name).toEqual(ref.shape)
    }
  })
})

describe('every float tensor of the dump matches transformers fp32', () => {
  it('relative error <= 1e-5 per tensor; the worst per class is printed', () => {
    const worst = new Map<string, { name: string, error: number }>()
    let compared = 0
    for (const [name, ref] of theirs.tensors) {
      if (ref.dtype !== 'F32') continue
      const t = ours.tensors.get(name)!
      const error = relError(floats(t), floats(ref))
      compared++
      expect(error, name).toBeLessThanOrEqual(TOLERANCE)
      const cls = tensorClass(name)
      if ((worst.get(cls)?.error ?? -1) < error) worst.set(cls, { name, error })
    }
    expect(compared).toBe(64)
    console.log('pd-bridge dump (f32) vs transformers fp32, worst relative error per tensor class:\n' +
      [...worst].sort().map(([cls, w]) => `  ${cls.padEnd(28)} ${w.error.toExponential(2)}  (${w.name})`).join('\n'))
  })
})

describe('every integer tensor of the dump equals the reference', () => {
  it('input_ids, entry counts and the 12 greedy tokens are identical', () => {
    let compared = 0
    for (const [name, ref] of theirs.tensors) {
      if (ref.dtype !== 'I64') continue
      expect(Array.from(viewAs(ours.tensors.get(name)!, 'I64')), name).toEqual(Array.from(viewAs(ref, 'I64')))
      compared++
    }
    expect(compared).toBe(12)
    expect(viewAs(ours.tensors.get('greedy')!, 'I64').length).toBe(12)
  })
})

describe('the dump says what produced it', () => {
  it('metadata: producer, profile and its fingerprint, T, split, greedy; stdout names the file', () => {
    const f32 = getProfile('f32')
    expect(ours.metadata).toMatchObject({
      producer: 'pd-bridge dump', profile: 'f32', profile_fingerprint: profileFingerprint(f32),
      tokens: '301', split: '130', greedy: '12', attn_inputs: 'yes',
    })
    expect(run.stdout).toMatch(/^wrote .*dump\.safetensors: 76 tensors, T=301, profile f32, split 130, greedy 12/)
  })
})

// Filling one parameter with its deterministic synthetic values.
import { encodeBf16, roundBf16 } from '../../numerics/bf16.ts'
import { PdBridgeError } from '../../errors.ts'
import type { ParamSpec } from './params.ts'
import { streamFor, type Xoshiro128 } from './random.ts'

/** A parameter's values in its storage form: bf16 codes, float32 values or int64 ids. */
export type ParamValues = Uint16Array | Float32Array | BigInt64Array

function elementCount (shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1)
}

// Normals are drawn a chunk at a time (fillNormals: the same sequence as nextNormal one by one).
const NORMALS_CHUNK = 1 << 16

function forNormalChunks (rng: Xoshiro128, count: number, each: (z: Float64Array, start: number) => void): void {
  const z = new Float64Array(Math.min(count, NORMALS_CHUNK))
  for (let start = 0; start < count; start += NORMALS_CHUNK) {
    const chunk = z.subarray(0, Math.min(NORMALS_CHUNK, count - start))
    rng.fillNormals(chunk)
    each(chunk, start)
  }
}

/**
 * The values make-checkpoint writes for `spec` under `seed`. Each parameter draws from its own
 * stream keyed by (seed, name), so the result does not depend on which other parameters exist.
 * Normal samples are float64, rounded to float32 and then (for BF16 storage or bf16Values) to the
 * nearest bf16, ties to even.
 */
export function initialValues (spec: ParamSpec, seed: number): ParamValues {
  const rng = streamFor(seed, spec.name)
  const count = elementCount(spec.shape)
  const init = spec.init
  if (init.kind === 'distinct-ids') {
    if (spec.dtype !== 'I64') throw new PdBridgeError(`${spec.name}: distinct-ids init needs I64, not ${spec.dtype}`)
    const width = spec.shape[spec.shape.length - 1]
    if (width > init.range) throw new PdBridgeError(`${spec.name}: cannot draw ${width} distinct ids from ${init.range}`)
    const out = new BigInt64Array(count)
    const pool = Array.from({ length: init.range }, (_, i) => i)
    for (let row = 0; row < count / width; row++) {
      // Partial Fisher-Yates over a fresh 0..range-1 pool: `width` distinct ids, uniformly chosen.
      for (let i = 0; i < init.range; i++) pool[i] = i
      for (let k = 0; k < width; k++) {
        const j = k + rng.nextInt(init.range - k)
        const picked = pool[j]
        pool[j] = pool[k]
        pool[k] = picked
        out[row * width + k] = BigInt(picked)
      }
    }
    return out
  }
  if (spec.dtype === 'BF16') {
    const out = new Uint16Array(count)
    const scaled = new Float32Array(Math.min(count, NORMALS_CHUNK))
    forNormalChunks(rng, count, (z, start) => {
      // Storing into a Float32Array is the float32 rounding f32ToBf16 starts with.
      const x = scaled.subarray(0, z.length)
      for (let i = 0; i < z.length; i++) x[i] = init.mean + init.std * z[i]
      encodeBf16(x, out.subarray(start, start + z.length))
    })
    return out
  }
  if (spec.dtype === 'F32') {
    const out = new Float32Array(count)
    forNormalChunks(rng, count, (z, start) => {
      for (let i = 0; i < z.length; i++) {
        const x = init.mean + init.std * z[i]
        out[start + i] = init.bf16Values ? roundBf16(x) : x
      }
    })
    return out
  }
  throw new PdBridgeError(`${spec.name}: normal init cannot fill dtype ${spec.dtype}`)
}

/**
 * Opt-in (make-checkpoint's `mirrorIndexerHeads`): make the lightning indexer's top-k free of
 * exact ties. An indexer score is sum_h w_h * relu(q_h . k_s) (times constants), so it is exactly
 * zero whenever every head's q_h . k_s <= 0, which random weights make common (1 in 2^heads entries
 * for independent heads); several entries at exactly zero tie, and engines break such ties
 * differently (ours: the lower index; llama.cpp's CPU top-k: whatever std::partial_sort leaves).
 * Here head 2j+1's rows of `indexer.q_b_proj` are head 2j's with the sign flipped (exact in bf16),
 * so q_{2j+1} = -q_{2j} for every token (rope and any rotation are linear) and relu(a) + relu(-a)
 * = |a|: every pair contributes one non-zero term, and a score can only be zero or tie another by an
 * exact floating-point coincidence. Needs an even index_n_heads. Changes only those tensors, in place.
 */
export function mirrorIndexerHeads (cfg: { indexNHeads: number, indexHeadDim: number, qLoraRank: number, layerTypes: readonly string[] }, tensors: Map<string, { dtype: string,
  shape: number[], data: Uint8Array }>): string[] {
  if (cfg.indexNHeads % 2 !== 0) throw new PdBridgeError(`mirrorIndexerHeads: index_n_heads is ${cfg.indexNHeads}, it needs an even number of heads to pair them`)
  const changed: string[] = []
  cfg.layerTypes.forEach((type, n) => {
    if (type !== 'compressed_sparse_attention') return
    const name = `model.layers.${n}.self_attn.compressor.indexer.q_b_proj.weight`
    const t = tensors.get(name)
    if (t === undefined || t.dtype !== 'BF16') throw new PdBridgeError(`mirrorIndexerHeads: ${name} is missing or not BF16`)
    const codes = new Uint16Array(t.data.buffer, t.data.byteOffset, t.data.byteLength / 2)
    const headValues = cfg.indexHeadDim * cfg.qLoraRank
    for (let h = 0; h + 1 < cfg.indexNHeads; h += 2) {
      for (let i = 0; i < headValues; i++) codes[(h + 1) * headValues + i] = codes[h * headValues + i] ^ 0x8000
    }
    changed.push(name)
  })
  return changed
}

// The decoder's cache arrays as block tensors and back. The cache holds float32 containers; in a
// bf16-activation profile their values are bf16-rounded, so BF16 storage halves the bytes without
// losing a bit. That holds only when EVERY value survives the round trip (a reference-quant hook
// or a future profile could leave one that does not), so the choice is made per tensor.
import type { Tensor } from '../../formats/safetensors/index.ts'
import type { NumericsProfile } from '../../model/profiles/index.ts'
import { bf16ToF32, decodeBf16, f32ToBf16 } from '../../numerics/bf16.ts'
import { f32ToBits } from '../../numerics/bits.ts'
import { RestoreRejected } from '../store/index.ts'

/**
 * How float32 cache arrays are stored: 'f32' always as F32; 'bf16-if-exact' as BF16 when every
 * value (its exact bits, NaN payloads and -0 included) survives f32 -> bf16 -> f32, else as F32.
 */
export type StorageRule = 'f32' | 'bf16-if-exact'

/** The rule a profile's blocks use: bf16-if-exact for bf16 activations, f32 otherwise. */
export function storageRuleFor (profile: Pick<NumericsProfile, 'activations'>): StorageRule {
  return profile.activations === 'bf16' ? 'bf16-if-exact' : 'f32'
}

/** The bf16 codes of `values` when every value is exactly a bf16 value (bit for bit), else null. */
export function exactBf16Codes (values: Float32Array): Uint16Array | null {
  const codes = new Uint16Array(values.length)
  for (let i = 0; i < values.length; i++) {
    const code = f32ToBf16(values[i])
    if (f32ToBits(bf16ToF32(code)) !== f32ToBits(values[i])) return null
    codes[i] = code
  }
  return codes
}

/** A block tensor of `shape` holding `values` (copied) under `rule`. */
export function storeF32 (values: Float32Array, shape: number[], rule: StorageRule): Tensor {
  if (rule === 'bf16-if-exact') {
    const codes = exactBf16Codes(values)
    if (codes !== null) return { dtype: 'BF16', shape, data: new Uint8Array(codes.buffer) }
  }
  const copy = values.slice()
  return { dtype: 'F32', shape, data: new Uint8Array(copy.buffer) }
}

/** The float32 values of a stored F32 or BF16 tensor (widened exactly); anything else is rejected. */
export function loadF32 (t: Tensor, what: string): Float32Array {
  const n = t.shape.reduce((a, b) => a * b, 1)
  if (t.dtype === 'F32' && t.data.byteLength === 4 * n) {
    const out = new Float32Array(n)
    new Uint8Array(out.buffer).set(t.data)
    return out
  }
  if (t.dtype === 'BF16' && t.data.byteLength === 2 * n) {
    const codes = new Uint16Array(n)
    new Uint8Array(codes.buffer).set(t.data)
    return decodeBf16(codes)
  }
  throw new RestoreRejected(what, `expected an F32 or BF16 tensor, found ${t.dtype} [${t.shape.join(',')}] with ${t.data.byteLength} bytes`)
}

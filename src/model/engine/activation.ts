// Where activations are rounded: to bf16 at transformers' bf16 rounding points, or nowhere (f32).
import { roundBf16 } from '../../numerics/bf16.ts'

/** The activation rounding of a profile: `round` is bf16 RNE in a bf16 profile, identity in f32. */
export interface ActivationRounding {
  readonly bf16: boolean
  round (x: number): number
  /** Round a[from, to) in place; returns a. */
  roundAll (a: Float32Array, from?: number, to?: number): Float32Array
}

const identity: ActivationRounding = {
  bf16: false,
  round: (x) => x,
  roundAll: (a) => a,
}

const toBf16: ActivationRounding = {
  bf16: true,
  round: roundBf16,
  roundAll (a, from = 0, to = a.length) {
    // roundBf16 on the bits (int32 arithmetic): add 0x7fff plus the lowest kept bit (ties to even),
    // drop the low half; NaN keeps its sign and becomes quiet, as f32ToBf16 does.
    const bits = new Int32Array(a.buffer, a.byteOffset, a.length)
    for (let i = from; i < to; i++) {
      const b = bits[i]
      bits[i] = (b & 0x7f800000) === 0x7f800000 && (b & 0x007fffff) !== 0
        ? (b & -0x80000000) | 0x7fc00000
        : ((b + 0x7fff + ((b >>> 16) & 1)) | 0) & -0x10000
    }
    return a
  },
}

/** The rounding for an activations setting. */
export function activationRounding (activations: 'f32' | 'bf16'): ActivationRounding {
  return activations === 'bf16' ? toBf16 : identity
}

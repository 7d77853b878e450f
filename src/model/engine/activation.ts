// Where activations are rounded: to bf16 at transformers' bf16 rounding points, or nowhere (f32).
import { roundBf16Array } from '../../kernels/index.ts'
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
  // roundBf16 on the bits, native for long ranges (src/kernels: roundBf16Array and its reference).
  roundAll: (a, from = 0, to = a.length) => roundBf16Array(a, from, to),
}

/** The rounding for an activations setting. */
export function activationRounding (activations: 'f32' | 'bf16'): ActivationRounding {
  return activations === 'bf16' ? toBf16 : identity
}

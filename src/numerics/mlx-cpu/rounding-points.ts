// Where MLX rounds, per backend, as data. The kernels of this folder read an entry instead of
// hard-coding their rounding, so a backend whose rules differ (Metal: it fuses rms_norm and rope and
// accumulates quantized matmuls in float32, none of which can be checked on this machine) is a new
// entry, not a rewrite. 'bf16' rounds to the model dtype at that point; 'f32' keeps float32 there.
import { bf16 } from './bf16-round.ts'

export type RoundTo = 'bf16' | 'f32'

export interface RoundingPoints {
  /** The backend and version the entry describes. */
  backend: string
  /** How the entry was established (a reader needs to know whether it was measured). */
  checked: string
  /** quantized_matmul: each x·w product, the running (group) sums, scale·group sum, the affine dequantized weight. */
  quantizedMatmul: { product: RoundTo, sum: RoundTo, scaled: RoundTo, dequantized: RoundTo }
  /** rms_norm: x·r, then ·weight (the sum of squares is a sequential float32 sum on every entry so far). */
  rmsNorm: { scaled: RoundTo, weighted: RoundTo }
  /** rope: the cos/sin tables, each of the four products, the two results. */
  rope: { tables: RoundTo, product: RoundTo, result: RoundTo }
  /** The compressor's pooling: gate + ape (ratio 4 and ratio 128), softmax weights, weight·kv, the window sum. */
  pooling: { overlapGate: RoundTo, simpleGate: RoundTo, weights: RoundTo, product: RoundTo, sum: RoundTo }
}

/** MLX 0.32.2's CPU backend (846d1762), bf16 activations: docs/mlx-cpu-arithmetic.md, each rule probed on MLX. */
export const MLX_CPU: RoundingPoints = Object.freeze({
  backend: 'mlx 0.32.2 cpu',
  checked: 'harness/mlx/probes on MLX 0.32.2 built here; the cache path is bit-identical to oMLX\'s model on it (suites/mlx)',
  quantizedMatmul: { product: 'bf16', sum: 'bf16', scaled: 'bf16', dequantized: 'bf16' },
  rmsNorm: { scaled: 'bf16', weighted: 'bf16' },
  rope: { tables: 'bf16', product: 'bf16', result: 'bf16' },
  pooling: { overlapGate: 'bf16', simpleGate: 'f32', weights: 'bf16', product: 'bf16', sum: 'bf16' },
}) as RoundingPoints

/** The rounding function of a rule. */
export function rounder (to: RoundTo): (x: number) => number {
  return to === 'bf16' ? bf16 : Math.fround
}

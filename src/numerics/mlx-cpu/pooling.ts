// The Compressor's two pooling functions (oMLX deepseek_v4_model.py _overlap_compress_kv and
// _simple_compress_kv, both mx.compile'd; compiling does not change the bits on the CPU) in the
// model's dtypes: softmax over the window axis, then bf16 products summed sequentially in bf16.
// mx.softmax over an axis other than the last is composed of ordinary ops (ops.cpp:4109-4118):
// max, exp(x − max), a sequential f32 sum, a true divide, then a cast back to the input dtype.
import { mlxExp as mlxExpImported } from './cephes.ts'
import { MLX_CPU, rounder, type RoundingPoints } from './rounding-points.ts'

// Hot loops call local bindings: test runners rewrite imported names as property reads.
const fround = Math.fround
const mlxExp = mlxExpImported

/**
 * An output as stored: a NaN is the positive quiet NaN (which NaN `a + b` of two NaNs gives depends
 * on operand order, which the JIT does not promise; the native kernel stores the same).
 */
function stored (v: number): number {
  return v === v ? v : NaN
}

/** Softmax over `rows` f32 values in place (one column of the window axis). */
function softmaxColumn (v: Float64Array, rows: number): void {
  let max = -Infinity
  for (let r = 0; r < rows; r++) if (v[r] > max) max = v[r]
  let sum = 0
  for (let r = 0; r < rows; r++) {
    v[r] = mlxExp(fround(v[r] - max))
    sum = fround(sum + v[r])
  }
  for (let r = 0; r < rows; r++) v[r] = fround(v[r] / sum)
}

/**
 * Ratio-4 overlap pooling. kv, gate: [windows·ratio, 2·dim] bf16 (the projections, gate without
 * the position bias); ape [ratio, 2·dim] bf16. Window w pools 2·ratio rows per channel c < dim:
 * first lane A (channels [0, dim)) of window w−1 (zeros gated −inf for w = 0), then lane B
 * (channels [dim, 2·dim)) of window w. gate + ape is a bf16 add; the softmax is `precise` (f32
 * inside) and its weights are rounded to bf16. Returns [windows, dim] bf16.
 */
export function overlapCompress (kv: Float32Array, gate: Float32Array, ape: Float32Array,
  windows: number, ratio: number, dim: number, points: RoundingPoints = MLX_CPU): Float32Array {
  const width = 2 * dim
  const gated = rounder(points.pooling.overlapGate)
  const weight = rounder(points.pooling.weights)
  const product = rounder(points.pooling.product)
  const add = rounder(points.pooling.sum)
  const out = new Float32Array(windows * dim)
  const g = new Float64Array(2 * ratio)
  const k = new Float64Array(2 * ratio)
  for (let w = 0; w < windows; w++) {
    for (let c = 0; c < dim; c++) {
      for (let r = 0; r < ratio; r++) {
        if (w === 0) {
          k[r] = 0
          g[r] = -Infinity
        } else {
          const a = ((w - 1) * ratio + r) * width + c
          k[r] = kv[a]
          g[r] = gated(gate[a] + ape[r * width + c])
        }
        const b = (w * ratio + r) * width + dim + c
        k[ratio + r] = kv[b]
        g[ratio + r] = gated(gate[b] + ape[r * width + dim + c])
      }
      softmaxColumn(g, 2 * ratio)
      let sum = 0
      for (let r = 0; r < 2 * ratio; r++) sum = add(sum + product(k[r] * weight(g[r])))
      out[w * dim + c] = stored(sum)
    }
  }
  return out
}

/**
 * Ratio-128 pooling. kv, gate: [windows·ratio, dim] bf16; ape [ratio, dim] bf16. The gate is cast
 * to f32 and the bias added in f32; softmax in f32; weights cast to bf16. Returns [windows, dim] bf16.
 */
export function simpleCompress (kv: Float32Array, gate: Float32Array, ape: Float32Array,
  windows: number, ratio: number, dim: number, points: RoundingPoints = MLX_CPU): Float32Array {
  const out = new Float32Array(windows * dim)
  const g = new Float64Array(ratio)
  const gated = rounder(points.pooling.simpleGate)
  const weight = rounder(points.pooling.weights)
  const product = rounder(points.pooling.product)
  const add = rounder(points.pooling.sum)
  for (let w = 0; w < windows; w++) {
    for (let c = 0; c < dim; c++) {
      for (let r = 0; r < ratio; r++) g[r] = gated(gate[(w * ratio + r) * dim + c] + ape[r * dim + c])
      softmaxColumn(g, ratio)
      let sum = 0
      for (let r = 0; r < ratio; r++) sum = add(sum + product(kv[(w * ratio + r) * dim + c] * weight(g[r])))
      out[w * dim + c] = stored(sum)
    }
  }
  return out
}

// Turning planned file tensors into the engine's internal tensors: dtype widening (F16 -> F32,
// I32 -> I64), fp8 block dequantisation, and stacking per-expert parts. Values are never rounded:
// BF16 and F32 stay as stored, the rest widen exactly (fp8 times its scale is the one float32
// multiply torch's dequantisation does).
import { CheckpointError } from '../../errors.ts'
import { tensorFrom, viewAs, type Tensor } from '../../formats/safetensors/index.ts'
import { decodeBf16 } from '../../numerics/bf16.ts'
import { decodeF16 } from '../../numerics/f16.ts'
import { dequantizeFp8BlockWeight, type Fp8BlockWeight } from '../../numerics/fp8-block-weight.ts'
import type { FileSource, TensorPlan } from './sources.ts'

/** Reads one file tensor by its name in the file. */
export type ReadFileTensor = (name: string) => Promise<Tensor>

/** A float tensor as stored (BF16 codes) or widened to float32. */
type FloatValues = { dtype: 'BF16', codes: Uint16Array } | { dtype: 'F32', values: Float32Array }

async function floatValues (source: FileSource, read: ReadFileTensor, dir?: string): Promise<FloatValues> {
  const t = await read(source.name)
  switch (t.dtype) {
    case 'BF16': return { dtype: 'BF16', codes: viewAs(t, 'BF16') }
    case 'F32': return { dtype: 'F32', values: viewAs(t, 'F32') }
    case 'F16': return { dtype: 'F32', values: decodeF16(viewAs(t, 'F16')) }
    case 'F8_E4M3': return { dtype: 'F32', values: dequantizeFp8BlockWeight(await fp8Weight(source, t, read)) }
    default: throw new CheckpointError(source.name, `cannot be read as floats: ${t.dtype}`, dir)
  }
}

async function fp8Weight (source: FileSource, t: Tensor, read: ReadFileTensor): Promise<Fp8BlockWeight> {
  const [rows, cols] = t.shape
  const codes = viewAs(t, 'F8_E4M3')
  const s = await read(source.scale!.name)
  if (s.dtype === 'F8_E8M0') return { rows, cols, codes, scaleFormat: 'ue8m0', scales: viewAs(s, 'F8_E8M0') }
  const scales = s.dtype === 'BF16' ? decodeBf16(viewAs(s, 'BF16')) : viewAs(s, 'F32')
  return { rows, cols, codes, scaleFormat: 'f32', scales }
}

function asF32 (v: FloatValues): Float32Array {
  return v.dtype === 'F32' ? v.values : decodeBf16(v.codes)
}

function tensorOf (v: FloatValues, shape: number[]): Tensor {
  return v.dtype === 'BF16' ? tensorFrom('BF16', shape, v.codes) : tensorFrom('F32', shape, v.values)
}

/** The internal tensor a plan describes, read through `read`. */
export async function materialize (plan: TensorPlan, read: ReadFileTensor, dir?: string): Promise<Tensor> {
  const shape = [...plan.spec.shape]
  if (plan.spec.dtype === 'I64') {
    if (plan.kind !== 'whole') throw new CheckpointError(plan.spec.name, 'an integer tensor cannot come in per-expert parts', dir)
    const t = await read(plan.source.name)
    if (t.dtype === 'I64') return t
    return tensorFrom('I64', shape, BigInt64Array.from(viewAs(t, 'I32'), (x) => BigInt(x)))
  }
  if (plan.kind === 'whole') return tensorOf(await floatValues(plan.source, read, dir), shape)

  // Per-expert parts, concatenated along rows inside each expert: [E, rows, cols].
  const [experts, rows, cols] = shape
  const parts: FloatValues[][] = []
  for (const expert of plan.parts) {
    const row: FloatValues[] = []
    for (const part of expert) row.push(await floatValues(part, read, dir))
    parts.push(row)
  }
  const allBf16 = parts.every((row) => row.every((v) => v.dtype === 'BF16'))
  const out = allBf16 ? new Uint16Array(experts * rows * cols) : new Float32Array(experts * rows * cols)
  for (let e = 0; e < experts; e++) {
    let offset = e * rows * cols
    for (const v of parts[e]) {
      const values = allBf16 ? (v as { codes: Uint16Array }).codes : asF32(v)
      out.set(values, offset)
      offset += values.length
    }
  }
  return allBf16 ? tensorFrom('BF16', shape, out) : tensorFrom('F32', shape, out)
}

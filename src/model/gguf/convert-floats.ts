// A checkpoint tensor's float values converted to a GGUF weight type, in bulk. A bf16 source (every
// make-checkpoint weight) has only 65,536 codes, so each output type gets a table made once by the
// per-value reference functions (bf16ToF32, then f32ToBf16 / f32ToF16) and every element is one
// table read: the same bits as converting value by value, without a function call per element.
// Widening to float32 is the code shifted into the top half (decodeBf16's rule), which keeps a
// signalling NaN's payload where a trip through a JavaScript number may or may not quieten it.
// A float32 source goes value by value through the same functions.
import type { Tensor } from '../../formats/safetensors/index.ts'
import { viewAs } from '../../formats/safetensors/index.ts'
import { bf16ToF32, f32ToBf16 } from '../../numerics/bf16.ts'
import { F16_MAX, f32ToF16 } from '../../numerics/f16.ts'
import { PdBridgeError } from '../../errors.ts'

/** The float types a 2-D weight or a norm is written as. */
export type GgufFloatType = 'F32' | 'F16' | 'BF16'

/** What to convert: the source tensor's name for messages, and optionally rows [from, to) of each expert. */
export interface FloatSelection {
  source: string
  rows?: [number, number]
}

/** Thrown for a value the output type cannot hold; deepseek4.ts wraps it as a GgufExportError. */
export class FloatConversionError extends PdBridgeError {}

const BF16_CODES = 0x10000

interface Bf16Tables { f32Bits: Uint32Array, bf16: Uint16Array, f16: Uint16Array, f16Overflows: Uint8Array }
let tables: Bf16Tables | undefined

function bf16Tables (): Bf16Tables {
  if (tables !== undefined) return tables
  const t: Bf16Tables = { f32Bits: new Uint32Array(BF16_CODES), bf16: new Uint16Array(BF16_CODES), f16: new Uint16Array(BF16_CODES), f16Overflows: new Uint8Array(BF16_CODES) }
  for (let c = 0; c < BF16_CODES; c++) {
    const x = bf16ToF32(c)
    t.f32Bits[c] = (c << 16) >>> 0
    t.bf16[c] = f32ToBf16(x)
    t.f16[c] = f32ToF16(x)
    t.f16Overflows[c] = Math.abs(x) > F16_MAX ? 1 : 0
  }
  tables = t
  return t
}

/** Rows [from, to) of each expert of an [E, rows, cols] array, or the whole array. */
function selectRows<T extends Uint16Array | Float32Array> (all: T, shape: readonly number[], rows: [number, number] | undefined): T {
  if (rows === undefined) return all
  const [experts, perExpert, cols] = shape
  const [from, to] = rows
  const out = new (all.constructor as new (n: number) => T)(experts * (to - from) * cols)
  for (let e = 0; e < experts; e++) {
    out.set(all.subarray((e * perExpert + from) * cols, (e * perExpert + to) * cols), e * (to - from) * cols)
  }
  return out
}

function overflowError (sel: FloatSelection, value: number, at: number): FloatConversionError {
  return new FloatConversionError(`tensor ${sel.source}: value ${value} at ${at} overflows f16 (pass --type bf16 or f32)`)
}

function fromBf16 (codes: Uint16Array, type: GgufFloatType, sel: FloatSelection): Uint8Array {
  const t = bf16Tables()
  const n = codes.length
  if (type === 'F32') {
    const out = new Uint32Array(n)
    const table = t.f32Bits
    for (let i = 0; i < n; i++) out[i] = table[codes[i]]
    return new Uint8Array(out.buffer)
  }
  const out = new Uint16Array(n)
  if (type === 'BF16') {
    const table = t.bf16
    for (let i = 0; i < n; i++) out[i] = table[codes[i]]
  }
  else {
    const table = t.f16
    const overflows = t.f16Overflows
    for (let i = 0; i < n; i++) {
      const c = codes[i]
      if (overflows[c] !== 0) throw overflowError(sel, bf16ToF32(c), i)
      out[i] = table[c]
    }
  }
  return new Uint8Array(out.buffer)
}

function fromF32 (values: Float32Array, type: GgufFloatType, sel: FloatSelection): Uint8Array {
  if (type === 'F32') return new Uint8Array(values.buffer, values.byteOffset, values.byteLength).slice()
  const n = values.length
  const out = new Uint16Array(n)
  if (type === 'BF16') {
    for (let i = 0; i < n; i++) out[i] = f32ToBf16(values[i])
  }
  else {
    for (let i = 0; i < n; i++) {
      if (Math.abs(values[i]) > F16_MAX) throw overflowError(sel, values[i], i)
      out[i] = f32ToF16(values[i])
    }
  }
  return new Uint8Array(out.buffer)
}

/** The little-endian bytes of `t`'s values (a BF16 or F32 tensor) as `type`, rows selected per `sel`. */
export function convertFloats (t: Tensor, type: GgufFloatType, sel: FloatSelection): Uint8Array {
  if (t.dtype === 'BF16') return fromBf16(selectRows(viewAs(t, 'BF16'), t.shape, sel.rows), type, sel)
  if (t.dtype === 'F32') return fromF32(selectRows(viewAs(t, 'F32'), t.shape, sel.rows), type, sel)
  throw new FloatConversionError(`tensor ${sel.source}: dtype ${t.dtype} is not a float dtype`)
}

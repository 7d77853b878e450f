// export-gguf's bulk float conversion against the per-value reference functions: every one of the
// 65,536 bf16 codes (NaNs, infinities, subnormals, both zeros) to each output type, the f16 overflow
// refusal at the first offending index, an expert row selection, and a float32 source.
import { describe, expect, it } from 'vitest'
import { tensorFrom } from '../../src/formats/safetensors/index.ts'
import { convertFloats } from '../../src/model/gguf/convert-floats.ts'
import { bf16ToF32, decodeBf16, f32ToBf16 } from '../../src/numerics/bf16.ts'
import { f32ToBits } from '../../src/numerics/bits.ts'
import { F16_MAX, f32ToF16 } from '../../src/numerics/f16.ts'

const allCodes = Uint16Array.from({ length: 0x10000 }, (_, c) => c)
const asU32 = (b: Uint8Array) => new Uint32Array(b.buffer, b.byteOffset, b.byteLength / 4)
const asU16 = (b: Uint8Array) => new Uint16Array(b.buffer, b.byteOffset, b.byteLength / 2)

describe('convertFloats', () => {
  it('bf16 -> f32 / bf16: every code gives the reference bits (f32: the code in the top half, as decodeBf16)', () => {
    const t = tensorFrom('BF16', [0x10000], allCodes)
    const f32 = asU32(convertFloats(t, 'F32', { source: 'x' }))
    const bf16 = asU16(convertFloats(t, 'BF16', { source: 'x' }))
    let f32Diffs = 0
    let bf16Diffs = 0
    for (let c = 0; c < 0x10000; c++) {
      const signallingNaN = (c & 0x7fff) > 0x7f80 && (c & 0x40) === 0
      if (f32[c] !== new Uint32Array(decodeBf16(Uint16Array.of(c)).buffer)[0] || (!signallingNaN && f32[c] !== f32ToBits(bf16ToF32(c)))) f32Diffs++
      if (bf16[c] !== f32ToBf16(bf16ToF32(c))) bf16Diffs++
    }
    expect({ f32Diffs, bf16Diffs }).toEqual({ f32Diffs: 0, bf16Diffs: 0 })
  })

  it('bf16 -> f16: every code in range gives the reference; the first overflow is refused by index', () => {
    const inRange = allCodes.filter((c) => !(Math.abs(bf16ToF32(c)) > F16_MAX))
    const out = asU16(convertFloats(tensorFrom('BF16', [inRange.length], inRange), 'F16', { source: 'x' }))
    expect(out.every((code, i) => code === f32ToF16(bf16ToF32(inRange[i])))).toBe(true)
    const big = f32ToBf16(70000)
    const withOverflow = Uint16Array.from([0x3f80, 0, big, big])
    expect(() => convertFloats(tensorFrom('BF16', [4], withOverflow), 'F16', { source: 'w' }))
      .toThrow(`tensor w: value ${bf16ToF32(big)} at 2 overflows f16 (pass --type bf16 or f32)`)
  })

  it('rows [from, to) of each expert, the same for bf16 and float32 sources', () => {
    const [experts, rows, cols] = [3, 4, 5]
    const codes = Uint16Array.from({ length: experts * rows * cols }, (_, i) => f32ToBf16(i * 0.37 - 7))
    const values = Float32Array.from(codes, bf16ToF32)
    const picked: number[] = []
    for (let e = 0; e < experts; e++) for (let r = 1; r < 3; r++) for (let c = 0; c < cols; c++) picked.push(values[(e * rows + r) * cols + c])
    const sel = { source: 'x', rows: [1, 3] as [number, number] }
    const fromBf16 = convertFloats(tensorFrom('BF16', [experts, rows, cols], codes), 'F32', sel)
    const fromF32 = convertFloats(tensorFrom('F32', [experts, rows, cols], values), 'F32', sel)
    expect([...new Float32Array(fromBf16.buffer)]).toEqual(picked)
    expect(fromF32).toEqual(fromBf16)
    expect(asU16(convertFloats(tensorFrom('F32', [experts, rows, cols], values), 'BF16', sel)))
      .toEqual(asU16(convertFloats(tensorFrom('BF16', [experts, rows, cols], codes), 'BF16', sel)))
  })

  it('a float32 source rounds through the reference functions; a non-float dtype is refused', () => {
    const values = Float32Array.from([1 + 2 ** -9, -3.14159, 1e-30, 65504, 65519.9, NaN])
    const t = tensorFrom('F32', [values.length], values)
    expect([...asU16(convertFloats(t, 'BF16', { source: 'x' }))]).toEqual([...values].map(f32ToBf16))
    const inRange = values.slice(0, 4)
    expect([...asU16(convertFloats(tensorFrom('F32', [4], inRange), 'F16', { source: 'x' }))]).toEqual([...inRange].map(f32ToF16))
    expect(() => convertFloats(t, 'F16', { source: 'x' })).toThrow(`tensor x: value ${values[4]} at 4 overflows f16`)
    expect(() => convertFloats(tensorFrom('I32', [1], Int32Array.of(1)), 'F32', { source: 'ids' })).toThrow('tensor ids: dtype I32 is not a float dtype')
  })
})

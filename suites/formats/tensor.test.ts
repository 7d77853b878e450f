// Dtype sizes, tensorFrom's checks, and viewAs's typed views (shared when aligned, copied when not).
import { describe, it, expect } from 'vitest'
import { NumericsError } from '../../src/errors.ts'
import { DTYPES, DTYPE_BITS, tensorByteLength, tensorFrom, viewAs, type Dtype, type Tensor } from '../../src/formats/safetensors/index.ts'

describe('DTYPE_BITS matches the reference bitsize() table', () => {
  it('has every dtype with its size', () => {
    // huggingface/safetensors Dtype::bitsize, snapshot 24b0b28.
    const reference: Record<string, number> = {
      F4: 4, F6_E3M2: 6, F6_E2M3: 6, BOOL: 8, U8: 8, I8: 8, F8_E5M2: 8, F8_E4M3: 8, F8_E8M0: 8, F8_E4M3FNUZ: 8,
      F8_E5M2FNUZ: 8, I16: 16, U16: 16, I32: 32, U32: 32, I64: 64, U64: 64, F16: 16, BF16: 16, F32: 32, F64: 64, C64: 64,
    }
    expect({ ...DTYPE_BITS }).toEqual(reference)
    expect([...DTYPES].sort()).toEqual(Object.keys(reference).sort())
  })
})

describe('tensorByteLength', () => {
  it('computes prod(shape) * bits / 8, 1 element for a scalar, 0 for an empty dim', () => {
    expect(tensorByteLength('BF16', [3, 5])).toEqual({ bytes: 30 })
    expect(tensorByteLength('F64', [])).toEqual({ bytes: 8 })
    expect(tensorByteLength('F32', [4, 0, 9])).toEqual({ bytes: 0 })
    expect(tensorByteLength('F4', [2, 3])).toEqual({ bytes: 3 })
    expect(tensorByteLength('F6_E2M3', [4])).toEqual({ bytes: 3 })
  })
  it('refuses sub-byte totals and sizes past 2^53 - 1', () => {
    expect(tensorByteLength('F6_E3M2', [2])).toEqual({ problem: 'F6_E3M2 shape [2] holds 12 bits, not a whole number of bytes' })
    expect(tensorByteLength('U64', [2 ** 26, 2 ** 26])).toHaveProperty('problem')
  })
})

describe('tensorFrom checks what it is given', () => {
  it('shares the bytes of the typed array it wraps', () => {
    const v = Float32Array.of(1, 2)
    const t = tensorFrom('F32', [2], v)
    expect(t.data.buffer).toBe(v.buffer)
    expect([...t.data]).toEqual([0, 0, 0x80, 0x3f, 0, 0, 0, 0x40])
  })
  it('accepts raw bytes for any dtype', () => {
    expect(tensorFrom('BF16', [2], new Uint8Array(4)).data.byteLength).toBe(4)
    expect(tensorFrom('F32', [1], new DataView(new ArrayBuffer(4))).data.byteLength).toBe(4)
  })
  it('refuses a byte count that does not match', () => {
    expect(() => tensorFrom('F32', [3], new Float32Array(2))).toThrow('tensorFrom: F32 [3] needs 12 bytes, got 8')
    expect(() => tensorFrom('F32', [3], new Float32Array(2))).toThrow(NumericsError)
  })
  it('refuses a typed array of another kind, even with the right byte count', () => {
    expect(() => tensorFrom('F32', [2], new Float64Array(1))).toThrow('F32 [2] needs a Float32Array or a Uint8Array of raw bytes, got Float64Array')
    expect(() => tensorFrom('F8_E4M3', [2], new Uint16Array(1))).toThrow('F8_E4M3 [2] needs a Uint8Array, got Uint16Array')
  })
  it('refuses bad shapes, unknown dtypes and non-views', () => {
    expect(() => tensorFrom('F32', [-1], new Float32Array(0))).toThrow('shape [-1] must be a list of non-negative safe integers')
    expect(() => tensorFrom('F32', [1.5], new Float32Array(0))).toThrow('shape [1.5]')
    expect(() => tensorFrom('X' as Dtype, [1], new Float32Array(1))).toThrow('unknown dtype "X"')
    expect(() => tensorFrom('F32', [1], [1] as unknown as Float32Array)).toThrow('needs a typed array or DataView')
  })
})

describe('viewAs gives the natural typed view', () => {
  const cases: [Dtype, unknown][] = [
    ['F32', Float32Array], ['F64', Float64Array], ['BF16', Uint16Array], ['F16', Uint16Array], ['U16', Uint16Array],
    ['I16', Int16Array], ['I8', Int8Array], ['U8', Uint8Array], ['BOOL', Uint8Array], ['I32', Int32Array], ['U32', Uint32Array],
    ['I64', BigInt64Array], ['U64', BigUint64Array], ['F8_E4M3', Uint8Array], ['F8_E5M2', Uint8Array], ['F8_E8M0', Uint8Array],
    ['F8_E4M3FNUZ', Uint8Array], ['C64', Uint8Array], ['F4', Uint8Array],
  ]
  it.each(cases)('%s', (dtype, View) => {
    const t: Tensor = { dtype, shape: [4], data: Uint8Array.from({ length: (DTYPE_BITS[dtype] * 4) / 8 }, (_, i) => i + 1) }
    const v = viewAs(t)
    expect(v).toBeInstanceOf(View)
    expect(v.byteLength).toBe(t.data.byteLength)
    expect(v.buffer).toBe(t.data.buffer)
  })

  it('decodes little-endian values', () => {
    const t = tensorFrom('BF16', [2], Uint8Array.of(0x80, 0x3f, 0x00, 0xc0))
    expect([...viewAs(t, 'BF16')]).toEqual([0x3f80, 0xc000])
    expect(viewAs(tensorFrom('I64', [], Uint8Array.of(0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)), 'I64')[0]).toBe(-2n)
  })

  it('copies when the bytes are misaligned, with the same values', () => {
    const backing = new Uint8Array(9)
    new DataView(backing.buffer).setFloat32(1, 1.5, true)
    new DataView(backing.buffer).setFloat32(5, -3, true)
    const t: Tensor = { dtype: 'F32', shape: [2], data: backing.subarray(1) }
    const v = viewAs(t, 'F32')
    expect(v.buffer).not.toBe(backing.buffer)
    expect([...v]).toEqual([1.5, -3])
  })

  it('refuses a tensor of another dtype than expected, and data of the wrong size', () => {
    expect(() => viewAs(tensorFrom('F32', [1], new Float32Array(1)), 'BF16')).toThrow('viewAs: expected a BF16 tensor, got F32 [1]')
    expect(() => viewAs({ dtype: 'F32', shape: [2], data: new Uint8Array(4) })).toThrow('viewAs: F32 [2] needs 8 bytes, the tensor holds 4')
  })
})

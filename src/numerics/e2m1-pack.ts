// Packing e2m1 codes two to a byte, LOW nibble first: element 2i sits in bits 0-3 and element
// 2i+1 in bits 4-7 of byte i. This is the order of gpt-oss-style MXFP4 `*.blocks` tensors.
import { checkCode, checkOutLength } from './codes.ts'
import { NumericsError } from '../errors.ts'

/** Pack e2m1 codes (one 0..15 code per element, even count) into bytes, low nibble first. */
export function packE2m1 (codes: Uint8Array, out: Uint8Array = new Uint8Array(codes.length >>> 1)): Uint8Array {
  if (codes.length % 2 !== 0) throw new NumericsError(`packE2m1: ${codes.length} codes cannot fill whole bytes`)
  checkOutLength(out.length, codes.length / 2, 'packE2m1')
  for (let i = 0; i < out.length; i++) {
    const low = codes[2 * i]
    const high = codes[2 * i + 1]
    if ((low | high) > 0xf) checkCode(Math.max(low, high), 0xf, `packE2m1 element ${low > 0xf ? 2 * i : 2 * i + 1}`)
    out[i] = low | (high << 4)
  }
  return out
}

/** Unpack bytes into e2m1 codes, two per byte: the low nibble first, then the high nibble. */
export function unpackE2m1 (packed: Uint8Array, out: Uint8Array = new Uint8Array(packed.length * 2)): Uint8Array {
  checkOutLength(out.length, packed.length * 2, 'unpackE2m1')
  for (let i = 0; i < packed.length; i++) {
    out[2 * i] = packed[i] & 0xf
    out[2 * i + 1] = packed[i] >>> 4
  }
  return out
}

// The MX load-time weight formats' quantise -> dequantise: argument checks and the reference of
// the native mxRoundTrip (native/src/mx_round_trip.cc). The reference is the composition of
// src/numerics' block quantisers and dequantisers, which define the result (their comments give
// the scale rule and the roundings); the kernel fuses the two per block.
import { NumericsError } from '../errors.ts'
import { dequantizeE2m1Blocks, quantizeE2m1Blocks } from '../numerics/mxfp4.ts'
import { dequantizeE4m3Blocks, quantizeE4m3Blocks } from '../numerics/mxfp8.ts'
import { checkArray, checkIntegers, checkSameOrNoOverlap, checkShape, describe } from './validate.ts'

/** The element formats: e4m3fn (MXFP8 at block 32) and e2m1 (MXFP4 at block 32). */
export type MxElement = 'e4m3' | 'e2m1'

/** The addon's code for each element format (native/src/mx_round_trip.h, MxElement). */
export const MX_ELEMENT_CODES = { e4m3: 0, e2m1: 1 } as const

/** Checked mxRoundTrip arguments; out may be x itself (blocks are read before written). */
export interface MxRoundTripArgs { x: Float32Array, block: number, element: MxElement, out: Float32Array }

export function checkMxRoundTrip (kernel: string, x: unknown, block: unknown, element: unknown, out: unknown): MxRoundTripArgs {
  const xs = checkArray(kernel, 'x', x, 'Float32Array')
  if (element !== 'e4m3' && element !== 'e2m1') {
    throw new NumericsError(`${kernel}: element must be 'e4m3' or 'e2m1', got ${typeof element === 'string' ? JSON.stringify(element) : describe(element)}`)
  }
  const [B] = checkIntegers(kernel, [['block', block, 1]])
  // e2m1 codes pack two to a byte: an odd block would split a byte between two scales.
  if (element === 'e2m1' && B % 2 !== 0) throw new NumericsError(`${kernel}: block must be even for e2m1, got ${B}`)
  if (xs.length % B !== 0) throw new NumericsError(`${kernel}: x has ${xs.length} elements, not a multiple of block = ${B}`)
  if (out === undefined) return { x: xs, block: B, element, out: new Float32Array(xs.length) }
  const o = checkArray(kernel, 'out', out, 'Float32Array')
  checkShape(kernel, 'out', o, [xs.length], '[length of x]')
  checkSameOrNoOverlap(kernel, o, xs)
  return { x: xs, block: B, element, out: o }
}

/** Reference: out = dequantize(quantize(x, block)) in `element`; returns out. */
export function mxRoundTrip (x: Float32Array, block: number, element: MxElement, out?: Float32Array): Float32Array {
  const a = checkMxRoundTrip('reference.mxRoundTrip', x, block, element, out)
  return a.element === 'e4m3'
    ? dequantizeE4m3Blocks(quantizeE4m3Blocks(a.x, a.block), a.out)
    : dequantizeE2m1Blocks(quantizeE2m1Blocks(a.x, a.block), a.out)
}

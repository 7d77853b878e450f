// Argument checks shared by the number-format modules, so bad input fails with a NumericsError
// that names the format and the problem instead of a silent wrap or a raw TypeError.
import { NumericsError } from '../errors.ts'

/** Throw unless `code` is an integer in 0..`max` (the code space of `format`). */
export function checkCode (code: number, max: number, format: string): void {
  if (!Number.isInteger(code) || code < 0 || code > max) {
    throw new NumericsError(`${format}: code ${String(code)} is not an integer in 0..${max}`)
  }
}

/** Throw unless an output buffer has the length its input implies. */
export function checkOutLength (actual: number, expected: number, what: string): void {
  if (actual !== expected) {
    throw new NumericsError(`${what}: output buffer holds ${actual} elements, expected ${expected}`)
  }
}

/** Throw unless `block` is a positive integer that divides `length` evenly. */
export function checkBlock (length: number, block: number, what: string): void {
  if (!Number.isSafeInteger(block) || block <= 0) {
    throw new NumericsError(`${what}: block size ${String(block)} is not a positive integer`)
  }
  if (length % block !== 0) {
    throw new NumericsError(`${what}: length ${length} is not a multiple of the block size ${block}`)
  }
}

/** Check that codes, scales and block size of a block-scaled tensor fit together. */
export function checkBlocks (codeCount: number, scaleCount: number, block: number, what: string): void {
  checkBlock(codeCount, block, what)
  if (codeCount / block !== scaleCount) {
    throw new NumericsError(`${what}: ${codeCount} values in blocks of ${block} need ${codeCount / block} scales, got ${scaleCount}`)
  }
}

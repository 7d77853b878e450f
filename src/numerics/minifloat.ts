// Rounding float32 to a small binary float format (f16, fp8, fp4): one routine, every format.
// Formats differ only in mantissa width, smallest normal exponent and what overflow means;
// the last is left to each format's module.

/**
 * Round a finite, non-negative float32 (given by its bit pattern, sign bit clear) to the
 * nearest value of a binary format with `manBits` stored mantissa bits and smallest normal
 * exponent `minExp` (that is 1 - bias), ties to even, with gradual underflow to the format's
 * subnormals. The exponent range is unbounded above: the result is the magnitude code
 * (exponent field << manBits | mantissa) and may lie past the format's largest finite code,
 * which tells the caller the value overflowed. `minExp` must be >= -126 and `manBits` < 23.
 */
export function roundToMinifloatCode (absBits: number, manBits: number, minExp: number): number {
  const biasedExp = absBits >>> 23
  // A float32 is sig * 2^(exp - 23); float32 subnormals use exp = -126 without the implicit bit.
  const exp = biasedExp === 0 ? -126 : biasedExp - 127
  const sig = biasedExp === 0 ? (absBits & 0x7fffff) : ((absBits & 0x7fffff) | 0x800000)
  if (sig === 0) return 0
  // Below the format's normal range the step stays at the subnormal step.
  const binade = exp > minExp ? exp : minExp
  const shift = binade - manBits - exp + 23
  // sig < 2^24 <= half a step once shift >= 25: the value rounds to zero.
  if (shift >= 25) return 0
  let steps = sig >>> shift
  const rest = sig & ((1 << shift) - 1)
  const half = 1 << (shift - 1)
  if (rest > half || (rest === half && (steps & 1) === 1)) steps++
  // In the normal range steps lies in [2^manBits, 2^(manBits+1)]; a carry to 2^(manBits+1)
  // lands on the next exponent's code, as it should. Below it, steps is the subnormal code.
  return ((binade - minExp) << manBits) + steps
}

/**
 * The value of magnitude code `code` (exponent field << manBits | mantissa) of a binary
 * format with `manBits` mantissa bits and smallest normal exponent `minExp`, ignoring any
 * special (Inf/NaN) meaning of the code. Exact: the result is a float32 value.
 */
export function minifloatMagnitude (code: number, manBits: number, minExp: number): number {
  const field = code >>> manBits
  const mantissa = code & ((1 << manBits) - 1)
  if (field === 0) return mantissa * 2 ** (minExp - manBits)
  return ((1 << manBits) + mantissa) * 2 ** (field - 1 + minExp - manBits)
}

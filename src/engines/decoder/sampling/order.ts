// The sampler's candidate order: every id of the vocabulary by value, largest first, the lowest id
// first on ties. A comparator sort of 129K ids cost 30-135 ms a token on this project's machines,
// paid once per sequence per step on the batcher's one thread; this stable LSD radix sort over the
// values' bits gives the very same order (it is a total order) in a few milliseconds. The digit
// width only changes how many passes it takes, never the order: 16-bit digits (4 passes over 65,536
// buckets) pay off at a vocabulary of 129K, while a small one (4,096) is cheaper in 8-bit digits
// (8 passes over 256 buckets), where the 16-bit buckets cost 16 times the ids. float32 values (the
// logits themselves) need half the key: 4 passes of 8-bit digits.

/** Below this many ids, 8-bit digits (8 passes of 256 buckets) cost less than 16-bit ones (4 of 65,536). */
export const SMALL_DIGIT_BELOW = 1 << 15

/**
 * Ids 0..n-1 ordered by `values` descending, ties by id ascending; -0 and +0 are equal, as the
 * comparator sees them. A NaN (where the comparator's order is undefined) goes last, by id.
 */
export function idsByValueDescending (values: ArrayLike<number>): Uint32Array {
  const n = values.length
  if (n === 0) return new Uint32Array(0)
  // Keys whose ascending unsigned order is the values' descending order, split in 32-bit halves.
  const hi = new Uint32Array(n)
  const lo = new Uint32Array(n)
  const bits = new Float64Array(1)
  const words = new Uint32Array(bits.buffer)
  for (let i = 0; i < n; i++) {
    const v = values[i]
    if (Number.isNaN(v)) {
      hi[i] = 0xffffffff
      lo[i] = 0xffffffff
      continue
    }
    bits[0] = v === 0 ? 0 : v
    const h = words[1]
    const l = words[0]
    // Negative: the raw bits already grow as the value falls. Positive: flip all but the sign.
    if (h >>> 31 === 1) {
      hi[i] = h
      lo[i] = l
    } else {
      hi[i] = (h ^ 0x7fffffff) >>> 0
      lo[i] = (l ^ 0xffffffff) >>> 0
    }
  }
  return idsByKeys(lo, hi, n < SMALL_DIGIT_BELOW ? 8 : 16)
}

/**
 * idsByValueDescending of float32 values, on their 32-bit patterns: half the key, half the passes.
 * The sampler orders a row of logits over a temperature by the logits themselves where that is the
 * same order (sampler.ts says when).
 */
export function idsByF32Descending (values: Float32Array): Uint32Array {
  const n = values.length
  if (n === 0) return new Uint32Array(0)
  const key = new Uint32Array(n)
  const raw = new Uint32Array(values.buffer, values.byteOffset, n)
  for (let i = 0; i < n; i++) {
    const b = raw[i]
    if ((b & 0x7f800000) === 0x7f800000 && (b & 0x007fffff) !== 0) key[i] = 0xffffffff
    else if ((b & 0x7fffffff) === 0) key[i] = 0x7fffffff
    else key[i] = b >>> 31 === 1 ? b : (b ^ 0x7fffffff) >>> 0
  }
  return idsByKeys(key, undefined, 8)
}

/**
 * Ids ordered by their keys ascending (lo, then hi as the more significant half when given), equal
 * keys by id ascending: stable LSD passes of `digitBits` each, least significant first.
 */
function idsByKeys (loKeys: Uint32Array, hiKeys: Uint32Array | undefined, digitBits: number): Uint32Array {
  const n = loKeys.length
  const withHi = hiKeys !== undefined
  let lo: Uint32Array = loKeys
  let hi: Uint32Array = hiKeys ?? new Uint32Array(0)
  let ids: Uint32Array = new Uint32Array(n)
  for (let i = 0; i < n; i++) ids[i] = i
  let loNext: Uint32Array = new Uint32Array(n)
  let hiNext: Uint32Array = new Uint32Array(withHi ? n : 0)
  let idsNext: Uint32Array = new Uint32Array(n)
  const buckets = 1 << digitBits
  const mask = buckets - 1
  const perHalf = 32 / digitBits
  const passes = (withHi ? 2 : 1) * perHalf
  const counts = new Uint32Array(buckets)
  // Keys move with their ids, so each pass reads in order; a digit every key shares is skipped.
  for (let pass = 0; pass < passes; pass++) {
    const half = pass < perHalf ? lo : hi
    const shift = (pass % perHalf) * digitBits
    counts.fill(0)
    for (let i = 0; i < n; i++) counts[(half[i] >>> shift) & mask]++
    if (counts[(half[0] >>> shift) & mask] === n) continue
    let sum = 0
    for (let b = 0; b < buckets; b++) {
      const c = counts[b]
      counts[b] = sum
      sum += c
    }
    for (let i = 0; i < n; i++) {
      const at = counts[(half[i] >>> shift) & mask]++
      loNext[at] = lo[i]
      if (withHi) hiNext[at] = hi[i]
      idsNext[at] = ids[i]
    }
    ;[lo, loNext] = [loNext, lo]
    ;[hi, hiNext] = [hiNext, hi]
    ;[ids, idsNext] = [idsNext, ids]
  }
  return ids
}

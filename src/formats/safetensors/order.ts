// The order the reference writer lays tensors out in, so our files are byte-identical to Python's.
import { referenceDtypeRank, type Dtype } from './dtype.ts'

/**
 * Compare two strings by Unicode code point, which is the order of their UTF-8 bytes (how Rust
 * compares `String`s). JS `<` compares UTF-16 units instead and disagrees when a character above
 * U+FFFF (a surrogate pair, units D800-DFFF) meets one in U+E000..U+FFFF.
 */
export function compareCodePoints (a: string, b: string): number {
  const n = Math.min(a.length, b.length)
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i)
    const y = b.charCodeAt(i)
    if (x !== y) return codePointWeight(x) - codePointWeight(y)
  }
  return a.length - b.length
}

/** Move surrogates above U+E000..U+FFFF: a surrogate starts a code point past U+FFFF. */
function codePointWeight (unit: number): number {
  if (unit >= 0xe000) return unit - 0x800
  if (unit >= 0xd800) return unit + 0x2000
  return unit
}

/**
 * THE GOLDEN-LAYOUT RULE. huggingface/safetensors `prepare()` sorts with
 * `right.dtype().cmp(&left.dtype()).then(lname.cmp(rname))`: the dtype's position in its `enum Dtype`
 * descending (U64, I64, F64, C64, F32, U32, I32, BF16, F16, U16, I16, F8_E5M2FNUZ, F8_E4M3FNUZ,
 * F8_E8M0, F8_E4M3, F8_E5M2, I8, U8, F6_E3M2, F6_E2M3, F4, BOOL), then the name by UTF-8 bytes.
 * The header lists tensors in that order and their bytes follow back to back in that order.
 */
export function compareReferenceOrder (a: { name: string, dtype: Dtype }, b: { name: string, dtype: Dtype }): number {
  return referenceDtypeRank(b.dtype) - referenceDtypeRank(a.dtype) || compareCodePoints(a.name, b.name)
}

/** A copy of `entries` in the reference writer's layout order (see `compareReferenceOrder`). */
export function referenceOrder<T extends { name: string, dtype: Dtype }> (entries: readonly T[]): T[] {
  return [...entries].sort(compareReferenceOrder)
}

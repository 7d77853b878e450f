// float32 arithmetic as MLX's C++ does it on the CPU. A double op on two float32 operands rounded
// once to float32 equals the float32 op (53 >= 2·24 + 2 bits), so `fround(a op b)` is exact for
// + − × ÷ and sqrt. Only a fused multiply-add needs care: its double sum may round onto a float32
// midpoint (double rounding), which `fma32` detects and settles from the sum's exact error.
export const fround = Math.fround

const scratchF = new Float32Array(1)
const scratchU = new Uint32Array(scratchF.buffer)

/** The float32 next to `r` (a float32) towards `toward`. */
function nextF32 (r: number, toward: number): number {
  if (r === 0) return toward > 0 ? 1.401298464324817e-45 : -1.401298464324817e-45
  scratchF[0] = r
  // Moving away from zero is +1 on the bit pattern, towards zero −1, whatever the sign.
  scratchU[0] += (toward > r) === (r > 0) ? 1 : -1
  return scratchF[0]
}

/** `std::fma(a, b, c)` on float32 operands: a·b + c rounded once to float32. */
export function fma32 (a: number, b: number, c: number): number {
  const p = a * b // exact: two 24-bit significands fit in 53 bits
  const s = p + c
  // Knuth's two-sum: s + e is p + c exactly.
  const bp = s - c
  const e = (p - bp) + (c - (s - bp))
  const r = fround(s)
  if (e === 0 || r === s || !Number.isFinite(r)) return r
  const n = nextF32(r, s)
  // s exactly halfway between two float32s: the exact value lies on e's side of it.
  if (Math.abs(s - r) !== Math.abs(n - s)) return r
  return (e > 0) === (n > r) ? n : r
}

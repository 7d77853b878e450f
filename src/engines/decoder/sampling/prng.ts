// The embedded decoder's PRNG: xoshiro128** 1.1 (Blackman and Vigna, 2018), 32-bit words only
// (Math.imul and shifts), its 128-bit state filled from SplitMix64 of the seed as in the authors'
// reference seeding. Every output is a pure function of the seed and how many draws came before.

const MASK64 = (1n << 64n) - 1n
const GAMMA = 0x9E3779B97F4A7C15n

/** SplitMix64: the next 64-bit output and state, from a state taken mod 2^64. */
function splitMix64 (state: bigint): { value: bigint, state: bigint } {
  const next = (state + GAMMA) & MASK64
  let z = next
  z = ((z ^ (z >> 30n)) * 0xBF58476D1CE4E5B9n) & MASK64
  z = ((z ^ (z >> 27n)) * 0x94D049BB133111EBn) & MASK64
  return { value: z ^ (z >> 31n), state: next }
}

function rotl (x: number, k: number): number {
  return (x << k) | (x >>> (32 - k))
}

/** xoshiro128** seeded from an integer seed taken mod 2^64 (a negative one as its two's complement). */
export class Xoshiro128StarStar {
  private readonly s = new Uint32Array(4)

  constructor (seed: number | bigint) {
    if (typeof seed === 'number' && !Number.isSafeInteger(seed)) throw new RangeError(`a PRNG seed must be a safe integer, got ${seed}`)
    let state = BigInt.asUintN(64, BigInt(seed))
    for (let i = 0; i < 4; i += 2) {
      const out = splitMix64(state)
      state = out.state
      this.s[i] = Number(out.value & 0xFFFFFFFFn)
      this.s[i + 1] = Number(out.value >> 32n)
    }
    // The all-zero state is the one xoshiro cannot leave; SplitMix64 never yields it for two words in a row, but be sure.
    if (this.s[0] === 0 && this.s[1] === 0 && this.s[2] === 0 && this.s[3] === 0) this.s[0] = 1
  }

  /** The next 32-bit output, unsigned. */
  nextUint32 (): number {
    const s = this.s
    const result = Math.imul(rotl(Math.imul(s[1], 5), 7), 9) >>> 0
    const t = s[1] << 9
    s[2] ^= s[0]
    s[3] ^= s[1]
    s[1] ^= s[2]
    s[0] ^= s[3]
    s[2] ^= t
    s[3] = rotl(s[3], 11)
    return result
  }

  /** A double uniform in [0, 1) with 53 random bits, from two outputs (the high 27 and 26 bits). */
  nextDouble (): number {
    const a = this.nextUint32() >>> 5
    const b = this.nextUint32() >>> 6
    return (a * 67108864 + b) / 9007199254740992
  }
}

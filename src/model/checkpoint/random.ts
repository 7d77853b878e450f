// Deterministic random numbers for synthetic checkpoints: one independent stream per parameter.
import { createHash } from 'node:crypto'
import { PdBridgeError } from '../../errors.ts'

const TWO_POW_26 = 67108864
const TWO_POW_53 = 9007199254740992

/** Left-rotate a 32-bit unsigned integer. */
function rotl (x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0
}

/** Left-rotate, result as a signed 32-bit integer (the same bits as rotl). */
function rotlInt (x: number, k: number): number {
  return (x << k) | (x >>> (32 - k))
}

/**
 * xoshiro128** (Blackman and Vigna): 128 bits of state, 32-bit outputs, all in integer math
 * (Math.imul, >>>), so every platform produces the same sequence.
 */
export class Xoshiro128 {
  private s0: number
  private s1: number
  private s2: number
  private s3: number
  // Box-Muller makes normals in pairs; the second one waits here.
  private spareNormal: number | undefined

  /** Start from four 32-bit state words; they must not all be zero. */
  constructor (state: [number, number, number, number]) {
    if (state.every((w) => (w >>> 0) === 0)) throw new PdBridgeError('xoshiro128**: the state must not be all zero')
    this.s0 = state[0] >>> 0
    this.s1 = state[1] >>> 0
    this.s2 = state[2] >>> 0
    this.s3 = state[3] >>> 0
  }

  /** The next 32-bit unsigned output. */
  nextU32 (): number {
    const result = Math.imul(rotl(Math.imul(this.s1, 5) >>> 0, 7), 9) >>> 0
    const t = (this.s1 << 9) >>> 0
    this.s2 = (this.s2 ^ this.s0) >>> 0
    this.s3 = (this.s3 ^ this.s1) >>> 0
    this.s1 = (this.s1 ^ this.s2) >>> 0
    this.s0 = (this.s0 ^ this.s3) >>> 0
    this.s2 = (this.s2 ^ t) >>> 0
    this.s3 = rotl(this.s3, 11)
    return result
  }

  /** A uniform double in [0, 1) with 53 random bits (two outputs: 27 high bits, 26 low bits). */
  nextUniform (): number {
    const hi = this.nextU32() >>> 5
    const lo = this.nextU32() >>> 6
    return (hi * TWO_POW_26 + lo) / TWO_POW_53
  }

  /** A uniform integer in [0, n), n <= 2^32 (bias below 2^-21, irrelevant for test weights). */
  nextInt (n: number): number {
    return Math.floor(this.nextUniform() * n)
  }

  /**
   * A standard normal sample, Box-Muller in float64. u1 is taken in (0, 1] so log never sees 0.
   * V8's log/sin/cos are its own fdlibm ports, not the system libm, so results do not depend on the OS.
   */
  nextNormal (): number {
    if (this.spareNormal !== undefined) {
      const z = this.spareNormal
      this.spareNormal = undefined
      return z
    }
    const u1 = 1 - this.nextUniform()
    const u2 = this.nextUniform()
    const r = Math.sqrt(-2 * Math.log(u1))
    const angle = 2 * Math.PI * u2
    this.spareNormal = r * Math.sin(angle)
    return r * Math.cos(angle)
  }

  /**
   * Fill `out` with the next out.length standard normals: the same values, in the same order, as
   * calling nextNormal that many times (the pair's spare included, before and after), with the
   * state in locals so a large tensor costs no call or property write per draw.
   */
  fillNormals (out: Float64Array): void {
    const n = out.length
    let i = 0
    if (n > 0 && this.spareNormal !== undefined) {
      out[i++] = this.spareNormal
      this.spareNormal = undefined
    }
    // int32 locals: XOR, shifts and Math.imul give the same low 32 bits as the unsigned originals.
    let s0 = this.s0 | 0
    let s1 = this.s1 | 0
    let s2 = this.s2 | 0
    let s3 = this.s3 | 0
    // The four 32-bit outputs one normal pair takes (nextUniform twice), each a nextU32 step.
    const r = new Int32Array(4)
    let t: number
    while (i < n) {
      for (let j = 0; j < 4; j++) {
        r[j] = Math.imul(rotlInt(Math.imul(s1, 5), 7), 9)
        t = s1 << 9; s2 ^= s0; s3 ^= s1; s1 ^= s2; s0 ^= s3; s2 ^= t; s3 = rotlInt(s3, 11)
      }
      const u1 = 1 - ((r[0] >>> 5) * TWO_POW_26 + (r[1] >>> 6)) / TWO_POW_53
      const u2 = ((r[2] >>> 5) * TWO_POW_26 + (r[3] >>> 6)) / TWO_POW_53
      const radius = Math.sqrt(-2 * Math.log(u1))
      const angle = 2 * Math.PI * u2
      out[i++] = radius * Math.cos(angle)
      if (i < n) out[i++] = radius * Math.sin(angle)
      else this.spareNormal = radius * Math.sin(angle)
    }
    this.s0 = s0 >>> 0
    this.s1 = s1 >>> 0
    this.s2 = s2 >>> 0
    this.s3 = s3 >>> 0
  }
}

/** Check that a seed is a non-negative safe integer (the CLI and makeCheckpoint accept nothing else). */
export function assertSeed (seed: number): void {
  if (!Number.isSafeInteger(seed) || seed < 0) {
    throw new PdBridgeError(`seed must be a non-negative integer, got ${String(seed)}`)
  }
}

/**
 * The stream for one parameter: state = the first 16 bytes of SHA-256("pd-bridge/v1\0<seed>\0<name>"),
 * read as four little-endian 32-bit words. Keying on the name (not on the parameter's position)
 * means adding or removing a parameter never shifts the values of the others.
 */
export function streamFor (seed: number, name: string): Xoshiro128 {
  assertSeed(seed)
  const digest = createHash('sha256').update(`pd-bridge/v1\0${seed}\0${name}`, 'utf8').digest()
  const words: [number, number, number, number] = [
    digest.readUInt32LE(0), digest.readUInt32LE(4), digest.readUInt32LE(8), digest.readUInt32LE(12),
  ]
  // An all-zero state has probability 2^-128; nudge it rather than throw.
  if (words.every((w) => w === 0)) words[0] = 1
  return new Xoshiro128(words)
}

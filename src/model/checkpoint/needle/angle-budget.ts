// The needle checkpoint's angle budget: how far its match pairs turn natively over the distances
// the protocol tests, and how far a stale YaRN factor turns them at the positions it tests. The
// question's query (rope at position q, the decoder's table) meets a pooled entry (rope at position
// e = q - D, from whoever wrote the cache). With frequencies f (decoder) and f' (the entry's writer),
// pair j aligns to cos(q f_j - e f'_j) = cos(D f_j - e (f'_j - f_j)): the first term is the native
// relative rotation, the second the stale-factor error, growing with the absolute position e.
import type { DeepseekV4Config } from '../../config.ts'
import { ropeInvFreq } from '../../rope.ts'
import { LAYER1, needlePlan } from './layout.ts'

/** One match pair's numbers. */
export interface PairBudget {
  pair: number
  /** Decoder frequency (rad/token) and the stale writer's. */
  frequency: number
  staleFrequency: number
  /** Native relative rotation at the longest tested distance (rad). */
  nativeAngleAtMaxDistance: number
  /** Stale error per token of absolute position, and at the native window's edge (rad). */
  staleErrorPerToken: number
  staleErrorAtWindow: number
}

/** The budget for one stale factor. */
export interface AngleBudget {
  staleFactor: number
  maxDistance: number
  nativeWindow: number
  pairs: PairBudget[]
  /** Mean cos over the match pairs: worst native case over distances 0..maxDistance. */
  nativeAlignment: { min: number, atDistance: number }
  /** Best stale case over entry positions nativeWindow..maxDistance and distances up to maxDistance - position. */
  staleAlignment: { max: number, atPosition: number, atDistance: number }
  /** Alignment a needle needs: its two entries beat the sink when 48 a > sink - ln 2. */
  threshold: number
}

/** Score of a fully aligned needle entry: four pairs at 0.5 * pairKeyNorm each. */
export const ALIGNED_SCORE = LAYER1.matchPairs.length * 0.5 * LAYER1.pairKeyNorm

/** The alignment a needle's two pooled entries need to outweigh layer 1's sink. */
export function alignmentThreshold (): number {
  return (LAYER1.sink - Math.LN2) / ALIGNED_SCORE
}

/**
 * The angle budget of the match pairs when the entries' writer used YaRN factor `staleFactor` while
 * the decoder uses the config's; distances up to `maxDistance`, stale positions from the native
 * window (original_max_position_embeddings) up to `maxDistance`. Steps of 2 tokens in distance and
 * 4 in position (entries sit at multiples of the compress ratio).
 */
export function angleBudget (cfg: DeepseekV4Config, staleFactor: number, maxDistance = 8192): AngleBudget {
  const p = cfg.rope.compress
  const nativeWindow = p.originalMaxPositionEmbeddings ?? cfg.maxPositionEmbeddings
  const f = ropeInvFreq(p)
  const g = ropeInvFreq({ ...p, factor: staleFactor })
  const pairs = needlePlan(cfg).matchPairs
  const n = pairs.length
  const alignment = (distance: number, position: number) => {
    let s = 0
    for (const j of pairs) s += Math.cos(distance * f[j] - position * (g[j] - f[j]))
    return s / n
  }
  let native = { min: Infinity, atDistance: 0 }
  for (let d = 0; d <= maxDistance; d += 2) {
    const a = alignment(d, 0)
    if (a < native.min) native = { min: a, atDistance: d }
  }
  let stale = { max: -Infinity, atPosition: 0, atDistance: 0 }
  for (let e = nativeWindow; e <= maxDistance; e += 4) {
    for (let d = 0; d <= maxDistance - e; d += 2) {
      const a = alignment(d, e)
      if (a > stale.max) stale = { max: a, atPosition: e, atDistance: d }
    }
  }
  return {
    staleFactor,
    maxDistance,
    nativeWindow,
    pairs: pairs.map((j) => ({
      pair: j,
      frequency: f[j],
      staleFrequency: g[j],
      nativeAngleAtMaxDistance: maxDistance * f[j],
      staleErrorPerToken: g[j] - f[j],
      staleErrorAtWindow: nativeWindow * (g[j] - f[j]),
    })),
    nativeAlignment: native,
    staleAlignment: stale,
    threshold: alignmentThreshold(),
  }
}

const rad = (x: number) => x.toFixed(3)

/** The budget as a markdown table (docs/needle-checkpoint.md carries this text verbatim). */
export function angleBudgetTable (b: AngleBudget): string {
  const lines = [
    `| pair | f (rad/token) | f with factor ${b.staleFactor} | native turn at ${b.maxDistance} tokens | stale error per 1,024 tokens of position |`,
    '| ---: | ---: | ---: | ---: | ---: |',
    ...b.pairs.map((p) => `| ${p.pair} | ${p.frequency.toExponential(3)} | ${p.staleFrequency.toExponential(3)} | ${rad(p.nativeAngleAtMaxDistance)} | ${rad(p.staleErrorPerToken * 1024)} |`),
    '',
    `Alignment (mean cos over the pairs): native at least ${b.nativeAlignment.min.toFixed(3)} (distance ${b.nativeAlignment.atDistance}); ` +
      `stale (factor ${b.staleFactor}, entries at ${b.nativeWindow}..${b.maxDistance}) at most ${b.staleAlignment.max.toFixed(3)} ` +
      `(entry at ${b.staleAlignment.atPosition}, distance ${b.staleAlignment.atDistance}); a needle needs ${b.threshold.toFixed(3)}.`,
  ]
  return lines.join('\n')
}

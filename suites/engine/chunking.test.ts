// Chunked prefill is bit-identical to one-shot prefill, for any split points, in both profiles:
// every cache tensor and every position's logits. This holds by construction (every kernel is
// batch-invariant, windows are aligned to position 0 and pooled only when complete, each query's
// keys and sums have one order whatever the chunk), and these tests are what keeps it so.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DeepseekV4Engine, type ModelCache } from '../../src/model/engine/index.ts'
import { cacheBitDifferences, firstBitDifference, readFixture, tinyCheckpoint } from './helpers.ts'

// Every split on the two transformers-parity profiles; two harder splits on the quantised ones.
const FULL = ['f32', 'hf-bf16']
const QUANTISED = ['decoder', 'prefill', 'decoder+refquant']

let dispose = () => {}
const engines = new Map<string, DeepseekV4Engine>()
let ids: number[] = []
const oneshot = new Map<string, { cache: ModelCache, logits: Float32Array, inputs: Float32Array[] }>()

beforeAll(async () => {
  const made = await tinyCheckpoint()
  dispose = made.dispose
  ids = (await readFixture('ref-tiny-t301-f32')).ids
  for (const profile of [...FULL, ...QUANTISED]) {
    const engine = DeepseekV4Engine.fromCheckpoint(made.ckpt, profile)
    engines.set(profile, engine)
    const cache = engine.newCache()
    const inputs: Float32Array[] = []
    const logits = engine.prefill(ids, cache, { logits: 'all', attnInputHook: (l, _s, rows) => { inputs[l] = rows.slice() } }).logits
    oneshot.set(profile, { cache, logits, inputs })
  }
})
afterAll(() => dispose())

/** Prefill ids in chunks ending at the given split points; returns the cache and all logits in order. */
function chunked (engine: DeepseekV4Engine, points: number[]): { cache: ModelCache, logits: Float32Array } {
  const cache = engine.newCache()
  const bounds = [0, ...points, ids.length]
  const parts: Float32Array[] = []
  for (let i = 0; i + 1 < bounds.length; i++) parts.push(engine.prefill(ids.slice(bounds[i], bounds[i + 1]), cache, { logits: 'all' }).logits)
  const logits = new Float32Array(parts.reduce((a, p) => a + p.length, 0))
  let o = 0
  for (const p of parts) {
    logits.set(p, o)
    o += p.length
  }
  return { cache, logits }
}

// Seeded split points of the form 4k + 1 (never on a ratio-4 window boundary), sorted, distinct.
function randomPoints (seed: number, count: number): number[] {
  let s = seed >>> 0
  const next = () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0
    return s / 2 ** 32
  }
  const set = new Set<number>()
  while (set.size < count) set.add(4 * Math.floor(next() * 74) + 1)
  return [...set].sort((a, b) => a - b)
}

const SPLITS: Array<[string, number[]]> = [
  ['at 130', [130]],
  ['1-token chunks for the first 20 tokens, then the rest', Array.from({ length: 20 }, (_, i) => i + 1)],
  ['at 127, 128 and 129 (around the window and the first HCA window)', [127, 128, 129]],
  ['at 9 seeded points 4k+1', randomPoints(20261130, 9)],
]

for (const profile of [...FULL, ...QUANTISED]) {
  describe(`${profile}: chunked prefill is bit-identical to one-shot prefill`, () => {
    for (const [label, points] of FULL.includes(profile) ? SPLITS : SPLITS.slice(1, 3)) {
      it(`split ${label}: every cache tensor and every position's logits`, () => {
        const ref = oneshot.get(profile)!
        const got = chunked(engines.get(profile)!, points)
        expect(cacheBitDifferences(got.cache, ref.cache), `points ${points.join(',')}`).toEqual([])
        expect(firstBitDifference(got.logits, ref.logits), 'first differing logit').toBe(-1)
      })
    }

    if (FULL.includes(profile)) it('the internal chunk size of one prefill call changes no bit (maxChunk 7)', () => {
      const engine = engines.get(profile)!
      const cache = engine.newCache()
      const logits = engine.prefill(ids, cache, { logits: 'all', maxChunk: 7 }).logits
      expect(cacheBitDifferences(cache, oneshot.get(profile)!.cache)).toEqual([])
      expect(firstBitDifference(logits, oneshot.get(profile)!.logits)).toBe(-1)
    })
  })

  if (FULL.includes(profile) || profile.endsWith('+refquant')) describe(`${profile}: a cache built from the attention inputs alone equals the prefill's`, () => {
    it('appendFromAttentionInputs in two chunks (130 + 171) gives the one-shot prefill cache bit for bit', () => {
      const engine = engines.get(profile)!
      const ref = oneshot.get(profile)!
      const hidden = engine.config.hiddenSize
      const cache = engine.newCache()
      for (const [a, b] of [[0, 130], [130, ids.length]]) {
        engine.appendFromAttentionInputs(cache, b - a, (layer) => ref.inputs[layer].slice(a * hidden, b * hidden))
      }
      expect(cacheBitDifferences(cache, ref.cache)).toEqual([])
    })
  })
}

describe('the bit comparison sees a one-ulp change', () => {
  it('a clone with one window value moved by one ulp differs in exactly that tensor', () => {
    const ref = oneshot.get('f32')!.cache
    const copy = ref.clone()
    expect(cacheBitDifferences(copy, ref)).toEqual([])
    const w = copy.layers[2].window
    const bits = new Uint32Array(w.buffer, w.byteOffset, w.length)
    bits[5] += 1
    expect(cacheBitDifferences(copy, ref)).toEqual(['c.layers.2.window@5'])
  })
})

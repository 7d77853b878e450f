// Continuous batching never changes an answer. Property: requests arriving at random event-loop
// turns (random prompt lengths, completion budgets, prefill chunk sizes, some cancelled part-way)
// run side by side through generate() on one DecodeBatcher, and each one's tokens, and the logits
// of every decode step it ran, are bit-identical to the same prompt run alone on the engine
// (one-shot prefill, then one decode at a time). A cancelled request's are a prefix of its solo run.
import { setImmediate as nextTurn } from 'node:timers/promises'
import fc from 'fast-check'
import { beforeAll, describe, expect, it } from 'vitest'
import { DecodeBatcher } from '../../src/engines/decoder/batcher.ts'
import { generate, type GenerationOutcome } from '../../src/engines/decoder/generate.ts'
import { GREEDY } from '../../src/engines/decoder/sampling/index.ts'
import { loadDecoderModel, type DecoderModel } from '../../src/engines/decoder/model.ts'
import type { ModelCache } from '../../src/model/engine/index.ts'
import { tinyCheckpoint } from '../support/checkpoints.ts'

let model: DecoderModel

beforeAll(async () => {
  model = await loadDecoderModel(tinyCheckpoint(), 'decoder')
})

function argmax (v: Float32Array): number {
  let best = 0
  for (let i = 1; i < v.length; i++) if (v[i] > v[best]) best = i
  return best
}

function promptOf (length: number, offset: number): number[] {
  return Array.from({ length }, (_, i) => ((offset + i) * 37) % 509 + 2)
}

/** The solo run: one-shot prefill, then greedy decode one token at a time; ids and each step's logits. */
const soloRuns = new Map<string, { ids: number[], steps: Float32Array[] }>()
function solo (prompt: number[], maxTokens: number): { ids: number[], steps: Float32Array[] } {
  const key = `${prompt.length}:${prompt[0]}:${maxTokens}`
  const known = soloRuns.get(key)
  if (known !== undefined) return known
  const { engine } = model
  const cache = engine.newCache()
  let logits = engine.prefill(prompt, cache).logits
  const ids: number[] = []
  const steps: Float32Array[] = []
  for (let i = 0; i < maxTokens; i++) {
    ids.push(argmax(logits))
    if (i + 1 < maxTokens) {
      logits = engine.decode(ids[i], cache)
      steps.push(logits)
    }
  }
  const run = { ids, steps }
  soloRuns.set(key, run)
  return run
}

function sameBits (a: Float32Array, b: Float32Array): boolean {
  if (a.length !== b.length) return false
  const x = new Uint32Array(a.buffer, a.byteOffset, a.length)
  const y = new Uint32Array(b.buffer, b.byteOffset, b.length)
  return x.every((v, i) => v === y[i])
}

const arrival = fc.record({
  length: fc.integer({ min: 1, max: 140 }),
  offset: fc.integer({ min: 0, max: 300 }),
  maxTokens: fc.integer({ min: 1, max: 10 }),
  /** Event-loop turns after the run starts. */
  at: fc.integer({ min: 0, max: 40 }),
  /** Turns after its arrival at which the client goes away; null: never. */
  cancelAt: fc.option(fc.integer({ min: 0, max: 60 }), { freq: 4 }),
})

describe('continuous batching is batch-invariant', () => {
  it('random arrivals, lengths, budgets, chunk sizes and cancellations: every answer and every step\'s logits equal the solo run', async () => {
    let widest = 0
    let interleaved = 0
    await fc.assert(fc.asyncProperty(fc.array(arrival, { minLength: 2, maxLength: 6 }), fc.constantFrom(16, 48, 256), async (requests, prefillChunk) => {
      // The engine as the batcher sees it, recording each sequence's step rows by its cache.
      const fed = new Map<ModelCache, { start: number, tokens: number[], rows: Float32Array[] }>()
      const batcher = new DecodeBatcher({
        decodeBatch: (tokens, caches) => {
          caches.forEach((c, i) => {
            if (!fed.has(c)) fed.set(c, { start: c.tokenCount, tokens: [], rows: [] })
            fed.get(c)!.tokens.push(tokens[i])
          })
          const out = model.engine.decodeBatch(tokens, caches)
          const vocab = out.length / caches.length
          caches.forEach((c, i) => fed.get(c)!.rows.push(out.slice(i * vocab, (i + 1) * vocab)))
          return out
        },
      })
      const ctx = { model, batcher, prefillChunk }
      const outcomes = await Promise.all(requests.map(async (r): Promise<GenerationOutcome> => {
        for (let t = 0; t < r.at; t++) await nextTurn()
        const abort = new AbortController()
        if (r.cancelAt !== null) void (async () => { for (let t = 0; t < r.cancelAt!; t++) await nextTurn(); abort.abort() })()
        return generate(ctx, { tokens: promptOf(r.length, r.offset), maxTokens: r.maxTokens, stop: [], ignoreEos: true, sampling: GREEDY, seed: 0, choice: 0 }, {}, abort.signal)
      }))
      widest = Math.max(widest, batcher.stats.maxRows)
      if (batcher.stats.chunks > 0 && batcher.stats.steps > 0) interleaved++
      requests.forEach((r, i) => {
        const want = solo(promptOf(r.length, r.offset), r.maxTokens)
        const got = outcomes[i].completionIds
        if (outcomes[i].finishReason === 'cancelled') expect(want.ids.slice(0, got.length)).toEqual(got)
        else {
          expect(outcomes[i].finishReason).toBe('length')
          expect(got).toEqual(want.ids)
        }
      })
      // Every sequence that stepped: its rows equal the solo run's steps of a request with its prompt.
      for (const seq of fed.values()) {
        // Requests with the same prompt share their solo run's prefix: the longest budget covers them all.
        const owners = requests.filter((r, i) => r.length === seq.start && seq.tokens.every((t, k) => outcomes[i].completionIds[k] === t))
        expect(owners.length, `a sequence of ${seq.start} prompt tokens fed ${seq.tokens.join(',')}`).toBeGreaterThan(0)
        const owner = owners.reduce((a, b) => b.maxTokens > a.maxTokens ? b : a)
        const want = solo(promptOf(owner.length, owner.offset), owner.maxTokens)
        expect(want.steps.length).toBeGreaterThanOrEqual(seq.rows.length)
        seq.rows.forEach((row, k) => expect(sameBits(row, want.steps[k]), `step ${k} of a ${seq.start}-token prompt`).toBe(true))
      }
      expect(batcher.stats.seats).toBe(0)
    }), { numRuns: 12, seed: 4102 })
    // Not vacuous: some steps batched several sequences, and prefill chunks ran between steps.
    expect(widest).toBeGreaterThan(1)
    expect(interleaved).toBeGreaterThan(0)
  }, 600_000) // generous: a loaded machine, and shrinking a counterexample reruns the model many times
})

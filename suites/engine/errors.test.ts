// Bad requests fail with a PdBridgeError that says what is wrong, before any cache is touched.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PdBridgeError } from '../../src/errors.ts'
import { DeepseekV4Engine, type ModelCache } from '../../src/model/engine/index.ts'
import { tinyCheckpoint } from './helpers.ts'

let dispose = () => {}
let engine: DeepseekV4Engine

beforeAll(async () => {
  const made = await tinyCheckpoint()
  dispose = made.dispose
  engine = DeepseekV4Engine.fromCheckpoint(made.ckpt, 'f32')
})
afterAll(() => dispose())

function rejects (f: () => unknown, message: RegExp): void {
  let caught: unknown
  try {
    f()
  } catch (err) {
    caught = err
  }
  expect(caught).toBeInstanceOf(PdBridgeError)
  expect((caught as Error).message).toMatch(message)
}

describe('prompt checks', () => {
  it('refuses an empty prompt', () => {
    rejects(() => engine.prefill([], engine.newCache()), /prompt is empty/)
  })

  it('refuses token ids outside the vocabulary, naming the token and vocab_size', () => {
    rejects(() => engine.prefill([3, 512], engine.newCache()), /token 1 is 512, not a token id in \[0, 512\) \(vocab_size\)/)
    rejects(() => engine.prefill([-1], engine.newCache()), /token 0 is -1/)
    rejects(() => engine.prefill([1.5], engine.newCache()), /token 0 is 1\.5/)
  })

  it('refuses a prompt that would run past max_position_embeddings, counting what the cache holds', () => {
    const cache = engine.newCache()
    cache.tokenCount = 32768 - 2 // as if 32766 tokens were cached: nothing is read before the check
    rejects(() => engine.prefill([5, 6, 7], cache), /32766 cached \+ 3 new tokens = 32769 positions, more than max_position_embeddings \(32768\)/)
    rejects(() => engine.prefill(new Array(32769).fill(5), engine.newCache()), /more than max_position_embeddings/)
  })

  it('leaves the cache untouched when it refuses', () => {
    const cache = engine.newCache()
    engine.prefill([5, 6, 7], cache, { logits: 'none' })
    const before = cache.tensors('c')
    rejects(() => engine.prefill([5, 9999], cache), /vocab_size/)
    expect(cache.tokenCount).toBe(3)
    expect(cache.tensors('c')).toEqual(before)
  })
})

describe('argument checks', () => {
  it('refuses a cache from another model or not a cache at all', () => {
    rejects(() => engine.prefill([1], {} as ModelCache), /not made by this engine's newCache\(\)/)
  })

  it('refuses bad options: logits tail, maxChunk, greedy k', () => {
    rejects(() => engine.prefill([1], engine.newCache(), { logits: { tail: -1 } }), /logits\.tail must be a non-negative integer/)
    rejects(() => engine.prefill([1], engine.newCache(), { maxChunk: 0 }), /maxChunk must be a positive integer/)
    rejects(() => engine.greedy([1], 1.5), /k must be a non-negative integer/)
  })

  it('refuses attention inputs of the wrong size, naming the layer', () => {
    rejects(() => engine.appendFromAttentionInputs(engine.newCache(), 2, () => new Float32Array(256)), /layer 0: expected a Float32Array of 2 x 256 = 512 values, found 256/)
  })

  it('refuses an unknown profile name', () => {
    rejects(() => DeepseekV4Engine.fromCheckpoint({} as never, 'fp64'), /unknown numerics profile "fp64"/)
  })
})

// The memory budget: past it the session seals a valid contiguous prefix [0, T') and the manifest
// says `partial` instead of failing. Valid means: the capture's tensors are the native cache of
// the first T' tokens, bit for bit, and the decoder can mount them and prefill the rest natively,
// ending where a native prefill of all T tokens ends. The expected T' is worked out here by
// simulating the held bytes of each candidate seal point directly (not with src/capture/budget.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CaptureSession, layerGeometries, layerStateValues, mountCapture, readCapture, type LayerGeometry, type Sidecar } from '../../src/capture/index.ts'
import { DeepseekV4Engine } from '../../src/model/engine/index.ts'
import { compareBits, fixtureTokens, nativeRun, replay, tinySetup, type TinySetup } from './helpers.ts'
import { providedSidecar } from '../support/checkpoints.ts'

const T = 700
let setup: TinySetup
let sidecar: Sidecar
let engine: DeepseekV4Engine
let geometries: LayerGeometry[]
let inputs: Float32Array[]
let requests = 0
const tokens = fixtureTokens(T)

beforeAll(async () => {
  setup = await tinySetup('budget')
  // The run's shared decoder sidecar (default block size), as exportWeights made it (suites/support/checkpoints.ts).
  sidecar = (await providedSidecar('tinyDecoderSidecar')).sidecar
  engine = DeepseekV4Engine.fromCheckpoint(setup.ckpt, 'decoder')
  geometries = layerGeometries(sidecar.json)
  inputs = nativeRun(engine, tokens).inputs
})
afterAll(() => setup.dispose())

const bytesAt = (layer: number, n: number): number => layerStateValues(geometries[layer], n) * 4

/**
 * Peak held bytes while the engine runs chunks of `chunk` tokens up to `end` through layers 0..3 in
 * order, stepped one feed at a time. With `release` (end is the seal point) a layer that reaches
 * `end` is written and holds nothing from then on; without, every layer is still held at `end`.
 */
function simulatedPeak (end: number, chunk: number, release = true): number {
  const pos = [0, 0, 0, 0]
  const done = [false, false, false, false]
  let peak = 0
  for (let s = 0; s < end; s += chunk) {
    for (let layer = 0; layer < 4; layer++) {
      pos[layer] = Math.min(s + chunk, end)
      peak = Math.max(peak, pos.reduce((a, p, i) => a + (done[i] ? 0 : bytesAt(i, p)), 0))
      if (release && pos[layer] === end) done[layer] = true
    }
  }
  return peak
}

/**
 * The seal point the rule promises: the first chunk end whose round would pass the budget, then
 * the largest n in that round whose sealed round fits (or the round's start).
 */
function expectedSeal (budget: number, chunk: number): number {
  for (let s = 0; s < T; s += chunk) {
    const e = Math.min(T, s + chunk)
    if (simulatedPeak(e, chunk, e === T) <= budget) continue
    for (let n = e - 1; n > s; n--) if (simulatedPeak(n, chunk) <= budget) return n
    return s
  }
  return T
}

async function capture (budget: number, maxChunk: number) {
  const requestId = `budget-${++requests}`
  const session = await CaptureSession.start({ sidecar, captureRoot: setup.root, requestId, tokenCount: T, memoryBudgetBytes: budget })
  // The decoder's attention inputs, in the order engine.prefill({ maxChunk }) hands them to its hook.
  replay(inputs, engine.config.hiddenSize, maxChunk, session.onAttentionInput)
  const manifest = await session.finish()
  const contents = await readCapture(session.dir, { request: { requestId, tokenCount: T, sidecarFingerprint: sidecar.fingerprint } })
  return { session, manifest, contents }
}

function nativePrefix (n: number) {
  const cache = engine.newCache()
  if (n > 0) engine.prefill(tokens.slice(0, n), cache, { logits: 'none' })
  return cache
}

describe('whole-prompt run (layer by layer): a budget below one layer\'s cache at T', () => {
  it('seals partial at the largest T\' whose biggest layer fits; the prefix is the native cache of T\' tokens, bit for bit', async () => {
    const budget = Math.max(...[0, 1, 2, 3].map((i) => bytesAt(i, 400)))
    const want = expectedSeal(budget, T)
    expect(want).toBeGreaterThanOrEqual(400)
    expect(want).toBeLessThan(T)
    const { session, manifest, contents } = await capture(budget, T)
    expect(manifest.state).toBe('partial')
    expect(manifest.sealedLength).toBe(want)
    expect(manifest.memoryBudgetBytes).toBe(budget)
    expect(session.peakHeldBytes).toBeLessThanOrEqual(budget)
    const result = compareBits(contents.tensors, prefixed(nativePrefix(want).tensors('x')))
    console.log(`sealed prefix (whole run): ${want}/${T} tokens, ${result.identical}/${result.total} bit-exact, peak ${session.peakHeldBytes} <= budget ${budget}`)
    expect(result.differing).toEqual([])
  })

  it('the decoder mounts the prefix and prefills the rest natively: caches and logits equal a native prefill of all T', async () => {
    const budget = Math.max(...[0, 1, 2, 3].map((i) => bytesAt(i, 400)))
    const { manifest, contents } = await capture(budget, T)
    const sealed = manifest.sealedLength
    const mounted = mountCapture(contents.tensors, sidecar, sealed)
    const rest = engine.prefill(tokens.slice(sealed), mounted, { logits: 'last' })
    const full = engine.newCache()
    const native = engine.prefill(tokens, full, { logits: 'last' })
    expect(compareBits(mounted.tensors('c'), full.tensors('c')).differing).toEqual([])
    expect(Buffer.compare(Buffer.from(rest.logits.buffer), Buffer.from(native.logits.buffer))).toBe(0)
  })
})

describe('chunked run (maxChunk 128): the budget is checked as the capture grows', () => {
  it('seals inside the first round that would pass the budget; the prefix is bit-exact; the peak stays under the budget', async () => {
    const budget = [0, 1, 2, 3].reduce((a, i) => a + bytesAt(i, 300), 0)
    const want = expectedSeal(budget, 128)
    expect(want).toBeGreaterThan(256)
    expect(want).toBeLessThan(T)
    const { session, manifest, contents } = await capture(budget, 128)
    expect(manifest.state).toBe('partial')
    expect(manifest.sealedLength).toBe(want)
    expect(session.peakHeldBytes).toBeLessThanOrEqual(budget)
    const result = compareBits(contents.tensors, prefixed(nativePrefix(want).tensors('x')))
    console.log(`sealed prefix (chunks of 128): ${want}/${T} tokens, ${result.identical}/${result.total} bit-exact, peak ${session.peakHeldBytes} <= budget ${budget}`)
    expect(result.differing).toEqual([])
  })
})

describe('budget edge cases', () => {
  it('a budget too small for one token seals an empty prefix: partial 0/T, every layer listed, mountable', async () => {
    const { manifest, contents } = await capture(1, 128)
    expect(manifest.state).toBe('partial')
    expect(manifest.sealedLength).toBe(0)
    expect(manifest.layers.length).toBe(4)
    expect(compareBits(contents.tensors, prefixed(engine.newCache().tensors('x'))).differing).toEqual([])
    expect(mountCapture(contents.tensors, sidecar, 0).tokenCount).toBe(0)
  })

  it('a budget that fits the whole capture gives done, in both modes', async () => {
    for (const maxChunk of [T, 128]) {
      const budget = [0, 1, 2, 3].reduce((a, i) => a + bytesAt(i, T), 0) + (1 << 20)
      const { session, manifest } = await capture(budget, maxChunk)
      expect(manifest.state).toBe('done')
      expect(session.peakHeldBytes).toBeLessThanOrEqual(budget)
    }
  })

  it('after sealing, the engine may keep feeding: rows past T\' are ignored', async () => {
    const budget = [0, 1, 2, 3].reduce((a, i) => a + bytesAt(i, 200), 0)
    const requestId = `budget-${++requests}`
    const session = await CaptureSession.start({ sidecar, captureRoot: setup.root, requestId, tokenCount: T, memoryBudgetBytes: budget })
    const cache = engine.newCache()
    for (let s = 0; s < T; s += 100) {
      engine.prefill(tokens.slice(s, s + 100), cache, { logits: 'none', attnInputHook: session.onAttentionInput })
      await session.flush()
    }
    expect(session.sealedLength).toBeLessThan(T)
    expect((await session.finish()).state).toBe('partial')
  })
})

/** Dump names `x.layers...` to capture names `layers...`. */
function prefixed<T> (m: Map<string, T>): Map<string, T> {
  return new Map([...m].map(([k, v]) => [k.replace(/^x\./, ''), v]))
}

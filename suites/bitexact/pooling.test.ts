// The pooling port, bit for bit (ARCHITECTURE.md section 7, check 1): the decoder's caches rebuilt by
// the capture hook, from a sidecar exported with --profile decoder, out of the decoder's own
// attention inputs, equal the decoder's native forward cache: every array, every bit. Lengths:
// short of one window (100), not aligned to anything (301), past several ratio-128 windows (700),
// past the tiny preset's original YaRN window of 1024 (1100). Both in memory (PoolingHook) and
// through capture files (CaptureSession -> layer files -> readCapture), in both engine modes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { join } from 'node:path'
import { CaptureSession, exportWeights, PoolingHook, readCapture, type Sidecar } from '../../src/capture/index.ts'
import { DeepseekV4Engine } from '../../src/model/engine/index.ts'
import { compareBits, fixtureTokens, nativeRun, replay, tinySetup, type TinySetup } from '../capture/helpers.ts'

const LENGTHS = [100, 301, 700, 1100]

let setup: TinySetup
let sidecar: Sidecar
let engine: DeepseekV4Engine
const native = new Map<number, ReturnType<typeof nativeRun>>()

beforeAll(async () => {
  setup = await tinySetup('bitexact')
  sidecar = await exportWeights({ model: setup.ckptDir, profile: 'decoder', out: join(setup.root, 'sidecar-decoder') })
  engine = DeepseekV4Engine.fromCheckpoint(setup.ckpt, 'decoder')
  for (const t of LENGTHS) native.set(t, nativeRun(engine, fixtureTokens(t)))
})
afterAll(() => setup.dispose())

describe('hook from the decoder sidecar == the decoder\'s native forward cache (in memory)', () => {
  it.each(LENGTHS)('T = %i: every cache array bit-exact', (t) => {
    const run = native.get(t)!
    const hook = new PoolingHook(sidecar.kvPath)
    run.inputs.forEach((x, layer) => hook.feed(layer, 0, x, t))
    const result = compareBits(hook.tensors('oneshot'), run.cache.tensors('oneshot'))
    console.log(`pooling port, decoder profile, T=${t}: ${result.identical}/${result.total} bit-exact`)
    expect(result.differing).toEqual([])
    expect(result.total).toBe(32)
  })
})

describe('capture files from a session == the native cache (whole-prompt and chunked forward order)', () => {
  it.each(LENGTHS)('T = %i: layer files read back are bit-exact, in both modes', async (t) => {
    const run = native.get(t)!
    const ref = run.cache.tensors('oneshot')
    for (const [mode, chunk] of [['whole', t], ['chunked', 128]] as const) {
      const session = await CaptureSession.start({ sidecar, captureRoot: setup.root, requestId: `t${t}-${mode}`, tokenCount: t })
      // The decoder's own attention inputs, replayed in the order engine.prefill({ maxChunk: chunk }) calls the hook.
      replay(run.inputs, engine.config.hiddenSize, chunk, session.onAttentionInput)
      const manifest = await session.finish()
      expect(manifest.state).toBe('done')
      const capture = await readCapture(session.dir, { prefix: 'oneshot', request: { requestId: `t${t}-${mode}`, tokenCount: t, sidecarFingerprint: sidecar.fingerprint } })
      const result = compareBits(capture.tensors, ref)
      console.log(`capture files, decoder profile, T=${t}, ${mode}: ${result.identical}/${result.total} bit-exact`)
      expect(result.differing).toEqual([])
    }
  })

  it('T = 1100 live: the session as the engine\'s own hook, chunks of 512', async () => {
    const session = await CaptureSession.start({ sidecar, captureRoot: setup.root, requestId: 'live-1100', tokenCount: 1100 })
    engine.prefill(fixtureTokens(1100), engine.newCache(), { logits: 'none', attnInputHook: session.onAttentionInput })
    expect((await session.finish()).state).toBe('done')
    const capture = await readCapture(session.dir, { prefix: 'oneshot' })
    expect(compareBits(capture.tensors, native.get(1100)!.cache.tensors('oneshot')).differing).toEqual([])
  })
})

describe('the comparison sees a one-bit change', () => {
  it('flipping the lowest bit of one pooled value is reported', () => {
    const run = native.get(301)!
    const hook = new PoolingHook(sidecar.kvPath)
    run.inputs.forEach((x, layer) => hook.feed(layer, 0, x, 301))
    const ours = hook.tensors('oneshot')
    const pooled = ours.get('oneshot.layers.2.compressor.compressed_kv')!
    new Uint32Array(pooled.data.buffer, pooled.data.byteOffset, pooled.data.length)[5] ^= 1
    expect(compareBits(ours, run.cache.tensors('oneshot')).differing).toEqual(['oneshot.layers.2.compressor.compressed_kv: first differing byte 20'])
  })
})

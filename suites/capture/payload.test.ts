// The payload minimum: the value count payload.ts claims for a layer's cache after n tokens is the
// real cache's (checked at every n up to 300 and at 700 and 1100); the minimum per token for the
// tiny and small presets, worked out by hand; a capture file adds only its header to the minimum.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CaptureSession, layerGeometries, layerStateValues, payloadMinimum, PoolingHook, type Sidecar } from '../../src/capture/index.ts'
import { presetConfig } from '../../src/model/checkpoint/index.ts'
import { getProfile } from '../../src/model/profiles/index.ts'
import { DeepseekV4Engine } from '../../src/model/engine/index.ts'
import { fixtureTokens, seeded, tinySetup, type TinySetup } from './helpers.ts'
import { providedSidecar } from '../support/checkpoints.ts'

let setup: TinySetup
let sidecar: Sidecar

beforeAll(async () => {
  setup = await tinySetup('payload')
  // The run's shared decoder sidecar (default block size), as exportWeights made it (suites/support/checkpoints.ts).
  sidecar = (await providedSidecar('tinyDecoderSidecar')).sidecar
})
afterAll(() => setup.dispose())

function presetJson (preset: 'tiny' | 'small', profile: string) {
  const cfg = presetConfig(preset)
  return {
    layers: cfg.layerTypes.map((layerType, index) => ({ index, layerType, compressRatio: cfg.compressRatios[index] })),
    headDim: cfg.headDim, indexHeadDim: cfg.indexHeadDim, slidingWindow: cfg.slidingWindow, compressRates: cfg.compressRates,
    profile: getProfile(profile),
  }
}

describe('layerStateValues counts the cache a layer really holds', () => {
  it('equals the float values of every layer\'s dump after each 1-token step to 300, and at 700 and 1100', () => {
    const hook = new PoolingHook(sidecar.kvPath)
    const geometries = layerGeometries(sidecar.json)
    const rand = seeded(3)
    const row = new Float32Array(256)
    const feedTo = (n: number): void => {
      for (let layer = 0; layer < 4; layer++) {
        for (let p = hook.position(layer); p < n; p++) {
          for (let i = 0; i < row.length; i++) row[i] = rand() * 2 - 1
          hook.feed(layer, p, row, 1)
        }
      }
    }
    const check = (n: number): void => {
      const counts = [0, 0, 0, 0]
      for (const [name, t] of hook.tensors('c')) if (t.dtype === 'F32') counts[Number(name.split('.')[2])] += t.data.length
      expect(counts, `n = ${n}`).toEqual(geometries.map((g) => layerStateValues(g, n)))
    }
    for (let n = 1; n <= 300; n++) {
      feedTo(n)
      check(n)
    }
    for (const n of [700, 1100]) {
      feedTo(n)
      check(n)
    }
  })
})

describe('the minimum per token', () => {
  it('tiny, bf16 decoder: pools 4 x 32 + 1 values per token = 258 bytes; windows and carries fixed', () => {
    const m = payloadMinimum(presetJson('tiny', 'decoder'), 1100)
    expect(m.bytesPerValue).toBe(2)
    expect(m.poolBytesPerToken).toBe(258)
    // Windows 4 x 127 x 128, CSA carries 2 pools x 2 layers x (4 x 128 kv + gate), HCA buffer 76 x 128 x 2, CSA buffers empty (1100 = 4 x 275).
    expect(m.fixedBytes).toBe((4 * 127 * 128 + 4 * 2 * 4 * 128 + 76 * 128 * 2) * 2)
    expect(m.bytes).toBe(m.fixedBytes + (2 * 275 * 256 + 8 * 128) * 2)
  })

  it('small, bf16 decoder: 3 CSA x (256 / 4 + 128 / 4) + 2 HCA x 256 / 128 = 292 values = 584 bytes per token', () => {
    const m = payloadMinimum(presetJson('small', 'decoder'), 4096)
    expect(m.poolBytesPerToken).toBe(584)
    expect(m.bytes).toBe(m.fixedBytes + 4096 * 584)
    // f32 doubles it.
    expect(payloadMinimum(presetJson('small', 'f32'), 4096).bytes).toBe(2 * m.bytes)
  })

  it('a capture\'s payload is the minimum plus file headers (under 2% at T = 301 on tiny)', async () => {
    const engine = DeepseekV4Engine.fromCheckpoint(setup.ckpt, 'decoder')
    const session = await CaptureSession.start({ sidecar, captureRoot: setup.root, requestId: 'payload', tokenCount: 301 })
    engine.prefill(fixtureTokens(301), engine.newCache(), { logits: 'none', attnInputHook: session.onAttentionInput })
    const manifest = await session.finish()
    const report = session.report()
    expect(report.payloadBytes).toBe(manifest.payloadBytes)
    expect(report.minimum.bytes).toBe(payloadMinimum(sidecar.json, 301).bytes)
    expect(report.overMinimum).toBeGreaterThan(1)
    expect(report.overMinimum).toBeLessThan(1.02)
    console.log(`tiny decoder T=301: payload ${report.payloadBytes} B (${report.payloadBytesPerToken.toFixed(1)} B/token), minimum ${report.minimum.bytes} B, x${report.overMinimum.toFixed(4)}`)
  })
})

// Capture sessions: layer files land per layer, in order, as layers complete; their checksums are the
// manifest's; a written layer's memory is released (the held-bytes counter, which is checked against
// the real cache sizes); a failure at any point leaves a `failed` manifest, never `done`.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CaptureSession, layerGeometries, layerStateValues, readCapture, type Sidecar } from '../../src/capture/index.ts'
import { readManifest, sha256Hex } from '../../src/wire/manifest.ts'
import { DeepseekV4Engine, type ModelCache } from '../../src/model/engine/index.ts'
import { fixtureTokens, nativeRun, tinySetup, type TinySetup } from './helpers.ts'
import { providedSidecar } from '../support/checkpoints.ts'

let setup: TinySetup
let sidecar: Sidecar
let engine: DeepseekV4Engine
let requests = 0
const tokens = fixtureTokens(301)

beforeAll(async () => {
  setup = await tinySetup('session')
  // The run's shared decoder sidecar (default block size), as exportWeights made it (suites/support/checkpoints.ts).
  sidecar = (await providedSidecar('tinyDecoderSidecar')).sidecar
  engine = DeepseekV4Engine.fromCheckpoint(setup.ckpt, 'decoder')
})
afterAll(() => setup.dispose())

function start (tokenCount = 301, memoryBudgetBytes?: number): Promise<CaptureSession> {
  return CaptureSession.start({ sidecar, captureRoot: setup.root, requestId: `req-${++requests}`, tokenCount, memoryBudgetBytes })
}

function layerFiles (dir: string): string[] {
  return readdirSync(dir).filter((f) => f.endsWith('.safetensors')).sort()
}

/** Float values in the live layers of a cache dump (what the held-bytes counter claims to count). */
function floatValues (cache: ModelCache, layers: number[]): number {
  let n = 0
  for (const [name, t] of cache.tensors('c')) {
    const layer = Number(/^c\.layers\.(\d+)\./.exec(name)![1])
    if (layers.includes(layer) && t.dtype === 'F32') n += t.data.length
  }
  return n
}

describe('whole-prompt run: each layer file lands as its layer completes, in order', () => {
  it('before layer i is fed, exactly files 0..i-1 exist; after, file i; nothing is held between layers', async () => {
    const session = await start()
    const seen: Array<{ layer: number, before: string[], after: string[], held: number }> = []
    engine.prefill(tokens, engine.newCache(), {
      logits: 'none',
      maxChunk: 301,
      attnInputHook: (layer, s, rows, count) => {
        const before = layerFiles(session.dir)
        session.onAttentionInput(layer, s, rows, count)
        seen.push({ layer, before, after: layerFiles(session.dir), held: session.heldBytes })
      },
    })
    const names = [0, 1, 2, 3].map((i) => `layer-00${i}.safetensors`)
    expect(seen.map((x) => x.layer)).toEqual([0, 1, 2, 3])
    seen.forEach((x, i) => {
      expect(x.before).toEqual(names.slice(0, i))
      expect(x.after).toEqual(names.slice(0, i + 1))
      expect(x.held).toBe(0)
    })
    // The peak is one layer at a time: the largest layer's cache at T, not the sum.
    const perLayer = layerGeometries(sidecar.json).map((g) => layerStateValues(g, 301) * 4)
    expect(session.peakHeldBytes).toBe(Math.max(...perLayer))
    expect(session.peakHeldBytes).toBeLessThan(perLayer.reduce((a, b) => a + b, 0))
    const manifest = await session.finish({ prefill: 12.5 })
    expect(manifest.state).toBe('done')
    expect(manifest.sealedLength).toBe(301)
    expect(manifest.timings.prefill).toBe(12.5)
    expect(manifest.timings.hook).toBeGreaterThan(0)
    expect(manifest.timings.layerWrite).toBeGreaterThan(0)
  })
})

describe('chunked run: layers complete only with the last chunk', () => {
  it('no file before the last chunk; the held-bytes counter equals the real cache sizes; then all four files', async () => {
    const session = await start()
    const hidden = engine.config.hiddenSize
    const { inputs } = nativeRun(engine, tokens)
    const native = engine.newCache()
    for (const [a, b] of [[0, 128], [128, 256]]) {
      inputs.forEach((x, layer) => session.onAttentionInput(layer, a, x.subarray(a * hidden, b * hidden), b - a))
      await session.flush()
      expect(layerFiles(session.dir)).toEqual([])
      engine.prefill(tokens.slice(a, b), native, { logits: 'none' })
      expect(session.heldBytes).toBe(floatValues(native, [0, 1, 2, 3]) * 4)
    }
    // The last chunk, layer by layer: layer i's file appears when layer i takes its last rows.
    for (let layer = 0; layer < 4; layer++) {
      session.onAttentionInput(layer, 256, inputs[layer].subarray(256 * hidden), 45)
      expect(layerFiles(session.dir).length).toBe(layer + 1)
    }
    expect(session.heldBytes).toBe(0)
    expect((await session.finish()).state).toBe('done')
  })
})

describe('a written layer\'s memory is released', () => {
  it('once layer 0\'s file lands, its cache arrays are collectable (WeakRef after a forced GC) while layer 1\'s are not', async () => {
    setFlagsFromString('--expose-gc')
    const gc = runInNewContext('gc') as () => void
    const session = await start()
    const hidden = engine.config.hiddenSize
    const { inputs } = nativeRun(engine, tokens)
    inputs.forEach((x, layer) => session.onAttentionInput(layer, 0, x, 200))
    // Reach into the session only to take weak references; the test keeps no strong one.
    const hook = (session as unknown as { hook: { layerCache: (i: number) => { window: Float32Array } } }).hook
    const refs = [0, 1].map((i) => new WeakRef(hook.layerCache(i).window))
    session.onAttentionInput(0, 200, inputs[0].subarray(200 * hidden), 101)
    expect(layerFiles(session.dir)).toEqual(['layer-000.safetensors'])
    await new Promise((resolve) => setImmediate(resolve))
    gc()
    expect(refs[0].deref()).toBeUndefined()
    expect(refs[1].deref()).toBeDefined()
    for (let layer = 1; layer < 4; layer++) session.onAttentionInput(layer, 200, inputs[layer].subarray(200 * hidden), 101)
    expect((await session.finish()).state).toBe('done')
  })
})

describe('checksums', () => {
  it('every listed file\'s size and SHA-256 are the manifest\'s; a changed file is refused by name', async () => {
    const session = await start()
    engine.prefill(tokens, engine.newCache(), { logits: 'none', attnInputHook: session.onAttentionInput })
    const manifest = await session.finish()
    expect(manifest.layers.map((e) => e.file)).toEqual(layerFiles(session.dir))
    for (const entry of manifest.layers) {
      const bytes = readFileSync(join(session.dir, entry.file))
      expect(bytes.length).toBe(entry.bytes)
      expect(sha256Hex(bytes)).toBe(entry.sha256)
    }
    expect(manifest.payloadBytes).toBe(manifest.layers.reduce((a, e) => a + e.bytes, 0))
    const path = join(session.dir, 'layer-002.safetensors')
    const bytes = readFileSync(path)
    bytes[bytes.length - 3] ^= 0x40
    writeFileSync(path, bytes)
    await expect(readCapture(session.dir)).rejects.toThrow(/layer-002\.safetensors: SHA-256 [0-9a-f]{64} does not match the manifest's/)
  })

  it('layer files are BF16 where the decoder holds bf16 (exact), with I64 entry counts and the layer\'s metadata', async () => {
    const session = await start()
    engine.prefill(tokens, engine.newCache(), { logits: 'none', attnInputHook: session.onAttentionInput })
    await session.finish()
    const bytes = readFileSync(join(session.dir, 'layer-001.safetensors'))
    const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + Number(bytes.readBigUInt64LE(0)))))
    expect(header.__metadata__).toEqual({ format: 'pd-bridge-capture-layer/1', layer: '1', layer_type: 'compressed_sparse_attention', tokens: '301', fingerprint: sidecar.fingerprint, profile: 'decoder' })
    expect(header['layers.1.window'].dtype).toBe('BF16')
    expect(header['layers.1.compressor.compressed_kv']).toMatchObject({ dtype: 'BF16', shape: [75, 128] })
    expect(header['layers.1.indexer.entry_count']).toMatchObject({ dtype: 'I64', shape: [1] })
  })
})

describe('a failure never leaves a done manifest', () => {
  it('the engine fails mid-prefill (the hook\'s caller throws at layer 2): fail() seals failed with the message', async () => {
    const session = await start()
    const run = (): void => {
      engine.prefill(tokens, engine.newCache(), {
        logits: 'none',
        maxChunk: 301,
        attnInputHook: (layer, s, rows, count) => {
          if (layer === 2) throw new Error('device lost at layer 2')
          session.onAttentionInput(layer, s, rows, count)
        },
      })
    }
    expect(run).toThrow('device lost at layer 2')
    await session.fail(new Error('device lost at layer 2'))
    const m = await readManifest(session.dir)
    expect(m.state).toBe('failed')
    expect(m.error).toBe('device lost at layer 2')
    expect(m.layers.map((e) => e.index)).toEqual([0, 1])
    await expect(readCapture(session.dir)).rejects.toThrow(/the capture is failed \(device lost at layer 2\)/)
    await expect(session.finish()).rejects.toThrow(/already sealed/)
  })

  it('bad input inside the hook: the engine sees the error, later rows are refused, finish() seals failed and throws', async () => {
    const session = await start()
    const hidden = engine.config.hiddenSize
    expect(() => session.onAttentionInput(0, 0, new Float32Array(10 * hidden), 11)).toThrow(/layer 0: expected a Float32Array of at least 11 x 256 = 2816 values, found 2560 values/)
    expect(() => session.onAttentionInput(0, 0, new Float32Array(10 * hidden), 10)).toThrow(/the session already failed/)
    await expect(session.finish()).rejects.toThrow(/capture req-\d+ failed: capture hook: layer 0: expected a Float32Array/)
    expect((await readManifest(session.dir)).state).toBe('failed')
  })

  it('finish() before every layer reached T: failed, naming the layers and where they stopped', async () => {
    const session = await start()
    engine.prefill(tokens.slice(0, 128), engine.newCache(), { logits: 'none', attnInputHook: session.onAttentionInput })
    await expect(session.finish()).rejects.toThrow(/finish before every layer reached the sealed length 301: layer 0 at 128, layer 1 at 128, layer 2 at 128, layer 3 at 128/)
    const m = await readManifest(session.dir)
    expect(m.state).toBe('failed')
    expect(m.layers).toEqual([])
  })

  it('non-contiguous rows and rows past T are refused by name', async () => {
    const a = await start()
    const rows = new Float32Array(301 * 256)
    expect(() => a.onAttentionInput(1, 5, rows, 3)).toThrow(/layer 1: rows start at position 5 but the layer holds 0 tokens; one layer's chunks must be contiguous/)
    const b = await start()
    expect(() => b.onAttentionInput(1, 0, new Float32Array(302 * 256), 302)).toThrow(/rows up to position 302 exceed the capture's 301 tokens/)
    const c = await start()
    expect(() => c.onAttentionInput(4, 0, rows, 1)).toThrow(/layer 4 is not a layer index in \[0, 4\)/)
  })

  it('fail() after a done finish changes nothing', async () => {
    const session = await start()
    engine.prefill(tokens, engine.newCache(), { logits: 'none', attnInputHook: session.onAttentionInput })
    await session.finish()
    await session.fail(new Error('late'))
    expect((await readManifest(session.dir)).state).toBe('done')
  })
})

describe('starting a session', () => {
  it('refuses a bad T, a bad budget, a reused request id', async () => {
    await expect(start(0)).rejects.toThrow(/tokenCount must be a positive integer, got 0/)
    await expect(start(40000)).rejects.toThrow(/40000 tokens exceed the sidecar's max_position_embeddings \(32768\)/)
    await expect(start(10, 0)).rejects.toThrow(/memoryBudgetBytes must be a positive integer, got 0/)
    await CaptureSession.start({ sidecar, captureRoot: setup.root, requestId: 'same', tokenCount: 5 })
    await expect(CaptureSession.start({ sidecar, captureRoot: setup.root, requestId: 'same', tokenCount: 5 })).rejects.toThrow(/already exists/)
  })

  it('the running manifest names the request, T, the sidecar fingerprint, the profile and the budget', async () => {
    const session = await start(301, 1 << 20)
    const m = await readManifest(session.dir)
    expect(m).toMatchObject({ state: 'running', tokenCount: 301, sealedLength: 0, sidecarFingerprint: sidecar.fingerprint, profile: 'decoder', numLayers: 4, memoryBudgetBytes: 1 << 20 })
  })
})

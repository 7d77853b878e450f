// The in-memory hook's refusals (each names the layer and the problem, and changes nothing), and the
// layer-file and mount readers refusing files that do not say what they should.
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { exportWeights, mountCapture, PoolingHook, type Sidecar } from '../../src/capture/index.ts'
import { serializeSafetensors, tensorFrom } from '../../src/formats/safetensors/index.ts'
import { DeepseekV4Engine, type DumpTensor } from '../../src/model/engine/index.ts'
import { decodeLayerFile, encodeLayerFile } from '../../src/wire/layer-file.ts'
import { compareBits, fixtureTokens, nativeRun, tinySetup, type TinySetup } from './helpers.ts'

let setup: TinySetup
let sidecar: Sidecar
let inputs: Float32Array[]
let nativeTensors: Map<string, DumpTensor>

beforeAll(async () => {
  setup = await tinySetup('hook')
  sidecar = await exportWeights({ model: setup.ckptDir, profile: 'hf-bf16', out: join(setup.root, 'sidecar') })
  const run = nativeRun(DeepseekV4Engine.fromCheckpoint(setup.ckpt, 'hf-bf16'), fixtureTokens(150))
  inputs = run.inputs
  nativeTensors = run.cache.tensors('c')
})
afterAll(() => setup.dispose())

describe('PoolingHook refuses bad feeds and is unchanged by them', () => {
  it('each refusal names the layer and the problem; afterwards the hook still ends bit-exact', () => {
    const hook = new PoolingHook(sidecar.kvPath)
    const h = 256
    hook.feed(1, 0, inputs[1], 10)
    expect(() => hook.feed(1, 0, inputs[1], 5)).toThrow(/layer 1: rows start at position 0 but the layer holds 10 tokens/)
    expect(() => hook.feed(1, 11, inputs[1], 5)).toThrow(/layer 1: rows start at position 11 but the layer holds 10 tokens/)
    expect(() => hook.feed(1, 10, inputs[1].subarray(10 * h, 12 * h), 3)).toThrow(/layer 1: expected a Float32Array of at least 3 x 256 = 768 values, found 512 values/)
    expect(() => hook.feed(1, 10, [] as unknown as Float32Array, 1)).toThrow(/found object/)
    expect(() => hook.feed(1, 10, inputs[1], 0)).toThrow(/count must be a positive integer, got 0/)
    expect(() => hook.feed(7, 0, inputs[1], 1)).toThrow(/layer 7 is not a layer index in \[0, 4\)/)
    expect(() => hook.feed(1, 10, new Float32Array(40000 * h), 32760)).toThrow(/positions up to 32770 exceed the sidecar's max_position_embeddings \(32768\)/)
    expect(hook.position(1)).toBe(10)
    hook.feed(1, 10, inputs[1].subarray(10 * h), 140)
    for (const layer of [0, 2, 3]) hook.feed(layer, 0, inputs[layer], 150)
    expect(compareBits(hook.tensors('c'), nativeTensors).differing).toEqual([])
  })

  it('a released layer takes no more rows, and a cache needs every layer at one length', () => {
    const hook = new PoolingHook(sidecar.kvPath)
    hook.feed(0, 0, inputs[0], 150)
    hook.release(0)
    expect(hook.released(0)).toBe(true)
    expect(() => hook.feed(0, 150, inputs[0], 1)).toThrow(/layer 0 was already written and released/)
    const other = new PoolingHook(sidecar.kvPath)
    other.feed(0, 0, inputs[0], 150)
    expect(() => other.tensors('c')).toThrow(/layer 1 holds 0 tokens but layer 0 holds 150/)
  })
})

describe('layer files and mounting refuse what does not fit', () => {
  it('a safetensors file that is not a capture layer file', () => {
    const bytes = serializeSafetensors({ 'layers.0.window': tensorFrom('F32', [0, 128], new Float32Array(0)) }, { format: 'pt' })
    expect(() => decodeLayerFile(bytes, 'x.safetensors')).toThrow(/x\.safetensors: metadata format is "pt", expected pd-bridge-capture-layer\/1/)
  })

  it('a tensor of another layer inside a layer file', () => {
    const bytes = serializeSafetensors({ 'layers.1.window': tensorFrom('F32', [0, 128], new Float32Array(0)) }, {
      format: 'pd-bridge-capture-layer/1', layer: '0', layer_type: 'sliding_attention', tokens: '0', fingerprint: 'f', profile: 'p',
    })
    expect(() => decodeLayerFile(bytes, 'y.safetensors')).toThrow(/tensor layers\.1\.window does not belong to layer 0/)
  })

  it('encode then decode gives back the cache tensors exactly (BF16 widened), and mount checks counts against T', () => {
    const hook = new PoolingHook(sidecar.kvPath)
    inputs.forEach((x, layer) => hook.feed(layer, 0, x, 150))
    const all = new Map<string, DumpTensor>()
    for (let layer = 0; layer < 4; layer++) {
      const bytes = encodeLayerFile(hook.layerCache(layer), { layer, layerType: sidecar.json.layers[layer].layerType, tokens: 150, fingerprint: sidecar.fingerprint, profile: 'hf-bf16' }, true)
      for (const [k, v] of decodeLayerFile(bytes, `layer ${layer}`).tensors) all.set(k, v)
    }
    const expected = new Map([...nativeTensors].map(([k, v]) => [k.replace(/^c\./, ''), v]))
    expect(compareBits(all, expected).differing).toEqual([])
    expect(compareBits(mountCapture(all, sidecar, 150).tensors('c'), nativeTensors).differing).toEqual([])
    expect(() => mountCapture(all, sidecar, 151)).toThrow(/mount: layers\.1\.compressor\.buffer_kv is F32 \[2, 256\], expected F32 \[3, 256\]/)
    all.delete('layers.2.compressor.buffer_kv')
    expect(() => mountCapture(all, sidecar, 150)).toThrow(/mount: the capture has no tensor layers\.2\.compressor\.buffer_kv/)
  })
})

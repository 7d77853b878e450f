// The mlx-cpu cache math as a product choice (docs/capture.md, "Cache math"): export-weights
// --cache-math mlx-cpu writes the cache path's weights exactly as MLX held them after mlx_lm.convert
// (harness/fixtures/mlx/tiny-mxq-cache-weights.safetensors, made by MLX: every tensor, every byte);
// the sidecar records the arithmetic and its rounding points, and the store geometry folds it in;
// the capture hook over that sidecar, fed MLX's own attention inputs in chunks of any size, holds
// oMLX's one-shot cache bit for bit (harness/fixtures/mlx/tiny-t301-mxq.safetensors); `dump
// --profile mlx-cpu` computes its caches through the same hook. The hook's kv layers (native
// kernels) also hold the 43-layer V4-Flash schedule's fixture bit for bit.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { readMlxFixture, type MlxFixture } from '../../harness/mlx/mlx-fixture.ts'
import { exportWeights, loadSidecar, PoolingHook, type Sidecar } from '../../src/capture/index.ts'
import { takeBoundarySnapshot } from '../../src/capture/boundary.ts'
import { dumpCheckpointMlxCpu } from '../../src/capture/mlx-cpu/dump.ts'
import { MlxCpuKvLayer } from '../../src/capture/mlx-cpu/kv-layer.ts'
import { mlxCpuKernelIsa, mlxCpuLastMatmulPath } from '../../src/kernels/mlx-cpu.ts'
import { readSafetensors, viewAs } from '../../src/formats/safetensors/index.ts'
import { checkpointDigest, makeCheckpoint, presetConfig } from '../../src/model/checkpoint/index.ts'
import type { LayerCache } from '../../src/model/engine/cache.ts'
import { getProfile } from '../../src/model/profiles/index.ts'
import { f32ToBf16 } from '../../src/numerics/bf16.ts'
import { Geometry } from '../../src/wire/geometry.ts'
import { cli } from '../dump/helpers.ts'
import { loadCase } from './capture-mlx-cpu-compare.ts'

const WEIGHTS = new URL('../../harness/fixtures/mlx/tiny-mxq-cache-weights.safetensors', import.meta.url).pathname

let root: string
let model: string
let mlx: Sidecar
let decoder: Sidecar
let fx: MlxFixture

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'pd-bridge-cache-math-'))
  model = join(root, 'tiny')
  await makeCheckpoint({ preset: 'tiny', seed: 1, out: model, force: true })
  mlx = await exportWeights({ model, profile: 'decoder', out: join(root, 'mlx'), blockSize: 128, cacheMath: 'mlx-cpu' })
  decoder = await exportWeights({ model, profile: 'decoder', out: join(root, 'decoder'), blockSize: 128 })
  fx = await readMlxFixture('tiny-t301-mxq')
})
afterAll(() => { rmSync(root, { recursive: true, force: true }) })

/** Count the elements of a cache array whose bf16 code differs from MLX's (a length mismatch throws). */
function differ (name: string, ours: Float32Array, ref: Uint16Array): number {
  if (ours.length !== ref.length) throw new Error(`${name}: ours ${ours.length} values, MLX's ${ref.length}`)
  let n = 0
  for (let i = 0; i < ours.length; i++) if (f32ToBf16(ours[i]) !== ref[i]) n++
  return n
}

/**
 * One layer's LayerCache against MLX's one-shot arrays: the window's rows (ours keeps window-1, the
 * last of MLX's), and per pool the pooled entries, the partial window's raw rows and CSA's last
 * window. Returns `name: differing/total` for every array that differs, and how many were compared.
 */
function againstMlx (layer: number, cache: LayerCache, against: MlxFixture = fx): { bad: string[], arrays: number } {
  const base = `oneshot.layers.${layer}`
  const bad: string[] = []
  let arrays = 0
  const one = (name: string, ours: Float32Array | null, tail = false): void => {
    if (!against.has(name)) {
      expect(ours === null || ours.length === 0, `${name}: MLX holds nothing, ours ${ours?.length} values`).toBe(true)
      return
    }
    let ref = viewAs(against.tensors.get(name)!, 'BF16')
    if (tail && ours !== null) ref = ref.subarray(ref.length - ours.length)
    const d = differ(name, ours ?? new Float32Array(0), ref)
    arrays++
    if (d !== 0) bad.push(`${name}: ${d}/${ref.length}`)
  }
  one(`${base}.window`, cache.windowRows(), true)
  const states = [cache.compressor, cache.indexer].filter((s) => s !== null)
  states.forEach((s, j) => {
    const p = `${base}.pool${j}`
    one(`${p}.pooled`, s.entryCount === 0 ? null : s.entries.view())
    one(`${p}.buf_kv`, s.bufferLength === 0 ? null : s.bufferKv.subarray(0, s.bufferLength * s.width))
    one(`${p}.buf_gate`, s.bufferLength === 0 ? null : s.bufferGate.subarray(0, s.bufferLength * s.width))
    one(`${p}.prev_win_kv`, s.prevWindowKv)
    one(`${p}.prev_win_gate`, s.prevWindowGate)
  })
  return { bad, arrays }
}

describe('export-weights --cache-math mlx-cpu', () => {
  it('writes every cache-path tensor exactly as MLX held it after mlx_lm.convert (all bytes of every tensor, the quantization table)', async () => {
    const ours = await readSafetensors(join(mlx.dir, 'weights.safetensors'))
    const ref = await readSafetensors(WEIGHTS)
    expect(ref.metadata.checkpoint_sha256, 'the fixture was made from another checkpoint').toBe(await checkpointDigest(model))
    expect([...ours.tensors.keys()].sort()).toEqual([...ref.tensors.keys()].sort())
    const differing: string[] = []
    let bytes = 0
    for (const [name, t] of ref.tensors) {
      const o = ours.tensors.get(name)!
      expect([o.dtype, o.shape], name).toEqual([t.dtype, t.shape])
      bytes += t.data.length
      if (Buffer.compare(Buffer.from(o.data), Buffer.from(t.data)) !== 0) differing.push(name)
    }
    console.log(`mlx-cpu sidecar vs MLX's cache weights: ${ref.tensors.size - differing.length}/${ref.tensors.size} tensors byte-identical (${bytes} bytes)`)
    expect(differing).toEqual([])
    expect(JSON.parse(ours.metadata.quantization)).toEqual(JSON.parse(ref.metadata.quantization))
  })

  it('records the cache math and its rounding points; the geometry differs from the decoder math\'s, which is unchanged', () => {
    expect(mlx.cacheMath).toBe('mlx-cpu')
    expect(mlx.json.cacheMath?.rounding.backend).toBe('mlx 0.32.2 cpu')
    expect(decoder.cacheMath).toBe('decoder')
    expect(decoder.json.cacheMath).toBeUndefined()
    const cfg = presetConfig('tiny')
    const profile = getProfile('decoder')
    // The decoder math's store geometry is the one every existing store was made with.
    expect(Geometry.fromSidecar(decoder.json).fingerprint).toBe(Geometry.fromConfig(cfg, profile).fingerprint)
    // A deployment of MLX's arithmetic names it, and only then do the blocks match.
    expect(Geometry.fromSidecar(mlx.json).fingerprint).not.toBe(Geometry.fromSidecar(decoder.json).fingerprint)
    expect(Geometry.fromSidecar(mlx.json).fingerprint).toBe(Geometry.fromConfig(cfg, profile, mlx.json.cacheMath).fingerprint)
    expect(mlx.fingerprint).not.toBe(decoder.fingerprint)
  })

  it('refuses an unknown cache math, an f32-activation profile, and an edited rounding entry', async () => {
    await expect(exportWeights({ model, profile: 'decoder', out: join(root, 'x'), cacheMath: 'metal' as never })).rejects.toThrow(/cacheMath: is "metal", expected one of decoder, mlx-cpu/)
    await expect(exportWeights({ model, profile: 'f32', out: join(root, 'y'), cacheMath: 'mlx-cpu' })).rejects.toThrow(/profile\.activations: is f32, but the mlx-cpu cache math computes bf16 values/)
    const edited = join(root, 'edited')
    await exportWeights({ model, profile: 'decoder', out: edited, cacheMath: 'mlx-cpu' })
    const file = join(edited, 'sidecar.json')
    const json = JSON.parse(readFileSync(file, 'utf8'))
    json.cacheMath.rounding.quantizedMatmul.sum = 'f32'
    writeFileSync(file, JSON.stringify(json))
    await expect(loadSidecar(edited)).rejects.toThrow(/fingerprint: is [0-9a-f]{64} but the geometry and weights give [0-9a-f]{64}/)
    json.cacheMath.rounding.quantizedMatmul.sum = 'f16'
    writeFileSync(file, JSON.stringify(json))
    await expect(loadSidecar(edited)).rejects.toThrow(/cacheMath\.rounding\.quantizedMatmul\.sum/)
  })
})

describe('the capture hook over an mlx-cpu sidecar holds oMLX\'s cache', () => {
  it('fed MLX\'s attention inputs in uneven chunks: every array bit-identical to MLX\'s one-shot cache, and a boundary snapshot equal to a one-shot prefill of the boundary', () => {
    const T = fx.ids.length
    const cfg = presetConfig('tiny')
    const h = cfg.hiddenSize
    const inputs = cfg.layerTypes.map((_, i) => fx.f32(`oneshot.layers.${i}.attn_input`))
    // Snapshots every 64 tokens (the sidecar's block size is 128; any interval splits the feeds the same way).
    const chunked = new PoolingHook(mlx.kvPath, { blockSize: 64 })
    const cuts = [1, 7, 64, 130, 131, 255, T]
    inputs.forEach((x, layer) => {
      let at = 0
      for (const end of cuts) { chunked.feed(layer, at, x.subarray(at * h, end * h), end - at); at = end }
    })
    const bad: string[] = []
    let arrays = 0
    cfg.layerTypes.forEach((_, layer) => {
      const r = againstMlx(layer, chunked.layerCache(layer))
      bad.push(...r.bad)
      arrays += r.arrays
    })
    console.log(`capture hook (mlx-cpu sidecar) vs MLX, T = ${T}, fed in chunks ending at ${cuts.join(', ')}: ${arrays - bad.length}/${arrays} arrays bit-identical`)
    expect(bad).toEqual([])
    expect(arrays).toBe(27)
    // The snapshot at 64, taken in the middle of a feed, is what a one-shot prefill of 64 tokens leaves.
    for (let layer = 0; layer < cfg.numHiddenLayers; layer++) {
      const snaps = chunked.boundaries(layer)
      expect(snaps.map((x) => x.boundary)).toEqual([64, 128, 192, 256])
      const ref = new PoolingHook(mlx.kvPath)
      ref.feed(layer, 0, inputs[layer], 64)
      expect(snaps[0], `layer ${layer} at 64`).toEqual(takeBoundarySnapshot(ref.layerCache(layer), 64))
    }
  })
})

describe('the capture hook\'s kv layers on V4-Flash\'s 43-layer schedule', () => {
  it('every array of every layer bit-identical to MLX\'s, fed in uneven chunks (flash-t301-mxq, the native kernels\' path)', async () => {
    const c = await loadCase('flash-t301-mxq', 'flash-mxq-cache-weights', 'flash-schedule')
    const pc = presetConfig('flash-schedule')
    const h = c.cfg.hiddenSize
    const cuts = [1, 7, 64, 130, 131, 255, c.T]
    const bad: string[] = []
    let arrays = 0
    // The path of each chunk's last matmul (native/src/mlx_cpu_isa.h): MLX's own inputs and weights
    // take the avx512-bf16 path on a CPU that has it, the unchecked one elsewhere, a chunk of one
    // row too (the weights were scanned once, when prepared).
    const paths = new Set<string>()
    c.weights.layers.forEach((w, layer) => {
      const kv = new MlxCpuKvLayer(w, c.cfg, layer, pc.layerTypes[layer], pc)
      const cache = kv.makeCache()
      const x = c.fx.f32(`oneshot.layers.${layer}.attn_input`)
      let at = 0
      for (const end of cuts) {
        kv.updateCache(x.subarray(at * h, end * h), end - at, at, cache)
        paths.add(mlxCpuLastMatmulPath())
        at = end
      }
      const r = againstMlx(layer, cache, c.fx)
      bad.push(...r.bad)
      arrays += r.arrays
    })
    console.log(`MlxCpuKvLayer vs MLX, flash-t301-mxq (${c.weights.layers.length} layers, T = ${c.T}), chunks ending at ${cuts.join(', ')}: ${arrays - bad.length}/${arrays} arrays bit-identical`)
    expect(bad).toEqual([])
    expect(arrays).toBe(312)
    const bf16Cpu = process.platform === 'linux' && readFileSync('/proc/cpuinfo', 'utf8').includes('avx512_bf16')
    expect([...paths]).toEqual([bf16Cpu && mlxCpuKernelIsa() === 'avx512' ? 'avx512-bf16' : 'unchecked'])
  })
})

describe('dump --profile mlx-cpu', () => {
  it('computes every cache tensor with MLX\'s arithmetic from the dump\'s own attention inputs; the split prefill agrees', async () => {
    const tokens = Array.from({ length: 41 }, (_, i) => (i * 37 + 11) % presetConfig('tiny').vocabSize)
    const dump = await dumpCheckpointMlxCpu({ model, profile: 'mlx-cpu', tokens, split: 17 })
    expect(dump.metadata).toMatchObject({ profile: 'mlx-cpu', cache_math: 'mlx-cpu', forward_profile: 'decoder', tokens: '41', split: '17' })
    const cfg = presetConfig('tiny')
    const hook = new PoolingHook(mlx.kvPath)
    let compared = 0
    for (let layer = 0; layer < cfg.numHiddenLayers; layer++) {
      hook.feed(layer, 0, viewAs(dump.tensors.get(`oneshot.layers.${layer}.attn_input`)!, 'F32'), tokens.length)
    }
    for (const [name, t] of hook.tensors('oneshot')) {
      const got = dump.tensors.get(name)
      expect(got, name).toBeDefined()
      expect(Buffer.from(got!.data).equals(Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength)), name).toBe(true)
      const chunked = dump.tensors.get(name.replace(/^oneshot\./, 'chunked.'))
      expect(chunked, `chunked ${name}`).toBeDefined()
      expect(Buffer.from(chunked!.data).equals(Buffer.from(got!.data)), `chunked ${name}`).toBe(true)
      compared++
    }
    expect(compared).toBeGreaterThan(cfg.numHiddenLayers)
  })
})

describe('the CLI', () => {
  it('dump --profile mlx-cpu runs; a bad cache math or profile name is refused naming the choices', async () => {
    const tokens = join(root, 'tokens.json')
    writeFileSync(tokens, JSON.stringify([5, 9, 14, 3, 77, 2, 8, 40, 41, 11]))
    const [badMath, dumped, badProfile] = await Promise.all([
      cli('export-weights', '--model', model, '--profile', 'decoder', '--cache-math', 'metal', '--out', join(root, 'never')),
      cli('dump', '--model', model, '--tokens', tokens, '--profile', 'mlx-cpu', '--out', join(root, 'dump.safetensors')),
      cli('dump', '--model', model, '--tokens', tokens, '--profile', 'mlx', '--out', join(root, 'never.safetensors')),
    ])
    expect(badMath.code).toBe(2)
    expect(badMath.stderr).toMatch(/--cache-math must be one of decoder, mlx-cpu, got "metal"/)
    expect(dumped.code, dumped.stderr).toBe(0)
    expect(dumped.stdout).toMatch(/profile mlx-cpu/)
    const { metadata } = await readSafetensors(join(root, 'dump.safetensors'))
    expect(metadata).toMatchObject({ cache_math: 'mlx-cpu', forward_profile: 'decoder' })
    expect(badProfile.code).toBe(2)
    expect(badProfile.stderr).toMatch(/unknown numerics profile "mlx"; known: .*; or mlx-cpu/)
  })
})

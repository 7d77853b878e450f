// The mlx-cpu cache path's output against an MLX fixture's one-shot cache, one array per stored
// tensor of each layer (window, and each PoolingCache's parts MLX holds), bit for bit.
import { expect } from 'vitest'
import { distance, type Distance } from '../../harness/mlx/distance.ts'
import { readMlxFixture, type MlxFixture } from '../../harness/mlx/mlx-fixture.ts'
import { mlxCpuCacheConfig, mlxCpuLayerCache, readMlxCpuCacheWeights, type MlxCpuCacheConfig, type MlxCpuCacheWeights } from '../../src/capture/mlx-cpu/index.ts'
import { presetConfig } from '../../src/model/checkpoint/presets.ts'
import { viewAs } from '../../src/formats/safetensors/index.ts'
import { f32ToBf16 } from '../../src/numerics/bf16.ts'
import type { MlxCpuLayerCache, MlxCpuPoolState } from '../../src/capture/mlx-cpu/index.ts'

export interface ArrayComparison {
  name: string
  /** Every bf16 code equal (so -0 against +0 counts as different, unlike an ulp distance). */
  bitIdentical: boolean
  distance: Distance
}

const POOL_PARTS = ['buf_kv', 'buf_gate', 'pooled', 'prev_win_kv', 'prev_win_gate'] as const

function partOf (p: MlxCpuPoolState, part: typeof POOL_PARTS[number]): Float32Array | null {
  return { buf_kv: p.bufKv, buf_gate: p.bufGate, pooled: p.pooled, prev_win_kv: p.prevWinKv, prev_win_gate: p.prevWinGate }[part]
}

function sameCodes (ours: Float32Array, ref: Uint16Array): boolean {
  if (ours.length !== ref.length) return false
  for (let i = 0; i < ours.length; i++) if (f32ToBf16(ours[i]) !== ref[i]) return false
  return true
}

/**
 * Every array MLX stored for `layer` after the one-shot prefill, against ours. A part MLX holds as
 * None or empty must be null on our side too (a thrown Error otherwise), and is not counted.
 */
export function compareLayer (fx: MlxFixture, ours: MlxCpuLayerCache): ArrayComparison[] {
  const base = `oneshot.layers.${ours.layer}`
  const out: ArrayComparison[] = []
  const one = (name: string, data: Float32Array | null): void => {
    if (!fx.has(name)) {
      const empty = fx.metadata[`${name}.none`] === '1' || fx.metadata[`${name}.zero_dim`] !== undefined
      if (!empty) throw new Error(`${fx.name}: ${name} is neither stored nor recorded as None or empty`)
      if (data !== null) throw new Error(`${name}: MLX holds nothing, ours ${data.length} values`)
      return
    }
    if (data === null) throw new Error(`${name}: MLX holds ${fx.f32(name).length} values, ours nothing`)
    const t = fx.tensors.get(name)!
    if (t.dtype !== 'BF16') throw new Error(`${name}: MLX stored ${t.dtype}, the path computes bf16`)
    const ref = viewAs(t, 'BF16')
    if (ref.length !== data.length) throw new Error(`${name}: MLX holds ${ref.length} values, ours ${data.length}`)
    out.push({ name, bitIdentical: sameCodes(data, ref), distance: distance(data, fx.f32(name), 'BF16') })
  }
  one(`${base}.window`, ours.window)
  ours.pools.forEach((p, j) => { for (const part of POOL_PARTS) one(`${base}.pool${j}.${part}`, partOf(p, part)) })
  // A pool MLX has and we do not (or the reverse) is a layout error.
  if (fx.metadata[`${base}.pool${ours.pools.length}.meta_state`] !== undefined) throw new Error(`${base}: MLX has a pool${ours.pools.length}, ours not`)
  return out
}

/** `name  100.000 %  max 0 ulp` lines. */
export function showComparisons (cs: readonly ArrayComparison[]): string {
  return cs.map((c) => `  ${c.name.padEnd(40)} identical ${(100 * c.distance.identicalFraction).toFixed(3).padStart(7)} %  max ${String(c.distance.maxUlp).padStart(5)} ulp${c.bitIdentical ? '' : '  (bits differ)'}`).join('\n')
}

export interface Case {
  fx: MlxFixture
  weights: MlxCpuCacheWeights
  cfg: MlxCpuCacheConfig
  T: number
}

export async function loadCase (fixture: string, weightsName: string, preset: string): Promise<Case> {
  const fx = await readMlxFixture(fixture)
  const weights = await readMlxCpuCacheWeights(new URL(`../../harness/fixtures/mlx/${weightsName}.safetensors`, import.meta.url).pathname)
  // Both files come from one reference run (same case, same checkpoint).
  expect(weights.metadata.case).toBe(fx.metadata.case)
  expect(weights.metadata.checkpoint_sha256).toBe(fx.metadata.checkpoint_sha256)
  const cfg = mlxCpuCacheConfig(presetConfig(preset))
  expect(weights.layers.length).toBe(cfg.compressRatios.length)
  return { fx, weights, cfg, T: fx.ids.length }
}

export function layerCache (c: Case, layer: number): MlxCpuLayerCache {
  return mlxCpuLayerCache(c.weights, c.cfg, layer, c.fx.f32(`oneshot.layers.${layer}.attn_input`), c.T)
}

export function runAll (c: Case): ArrayComparison[] {
  const all: ArrayComparison[] = []
  for (let l = 0; l < c.weights.layers.length; l++) all.push(...compareLayer(c.fx, layerCache(c, l)))
  return all
}

export function tableLine (cs: readonly ArrayComparison[]): string {
  return `arrays bit-identical, capture vs MLX-computed native: ${cs.filter((c) => c.bitIdentical).length}/${cs.length}`
}


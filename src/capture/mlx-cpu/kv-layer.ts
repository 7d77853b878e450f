// One layer's kv path with MLX's CPU arithmetic, fed in chunks of any size: what the capture hook
// runs when the sidecar's cache math is mlx-cpu. It keeps the same LayerCache the decoder math does
// (window rows, pooled entries, the partial window's raw rows, CSA's last window and its carry), so
// the hook, the boundary snapshots, the carry and the block writers need no second code path.
//
// Chunking cannot change a bit: every step of MLX's one-shot cache (layer-cache.ts) is per row (the
// quantized matmuls, rms_norm, rope at the row's absolute position) or per window (a pooled entry
// reads its own window and, for ratio 4, lane A of the window before it, kept raw in
// prevWindowKv/Gate), so pooling a window the moment it is complete gives the one-shot result.
// suites/mlx/cache-math.test.ts proves it against MLX's fixtures at several chunkings. The two
// quantized matmuls and the pooling (nearly all the work) run in native code, bit for bit their
// TypeScript references (src/kernels/mlx-cpu.ts).
import { PdBridgeError } from '../../errors.ts'
import { LayerCache, type CompressorState } from '../../model/engine/cache.ts'
import { layerCacheLayout, type LayerCacheLayout } from '../../model/engine/cache-layout.ts'
import type { LayerType } from '../../model/config.ts'
import { roundBf16Array } from '../../kernels/index.ts'
import {
  affineMatmulNative, mlxPoolNative, mlxRopeRowsNative, mxfp8MatmulNative, prepareAffine, prepareMxfp8, type PreparedAffine, type PreparedMxfp8,
} from '../../kernels/mlx-cpu.ts'
import { mlxRmsNormRows } from '../../numerics/mlx-cpu/rms-norm.ts'
import { rounder } from '../../numerics/mlx-cpu/rounding-points.ts'
import type { MlxCpuCacheConfig } from './config.ts'
import { poolInvFreqs, poolWindows, windowInvFreqs, type PoolKernels } from './layer-cache.ts'
import type { MlxCompressorWeights, MlxCpuLayerWeights } from './weights.ts'

/** poolWindows' steps in native code. */
const NATIVE_POOL_KERNELS: PoolKernels = { pool: mlxPoolNative, ropeRows: mlxRopeRowsNative }

/** A compressor's weights with what does not depend on the input formed once. */
interface PreparedPool {
  w: MlxCompressorWeights
  kv: PreparedAffine
  gate: PreparedAffine
  inv: Float32Array
}

/** The capture hook's view of a layer's kv path (src/capture/kv-path.ts): MLX's arithmetic. */
export class MlxCpuKvLayer {
  private readonly windowInv: Float32Array
  private readonly wkv: PreparedMxfp8
  private readonly pools: PreparedPool[]
  private readonly layout: LayerCacheLayout

  constructor (private readonly weights: MlxCpuLayerWeights, private readonly cfg: MlxCpuCacheConfig,
    readonly layer: number, type: LayerType, dims: Parameters<typeof layerCacheLayout>[1]) {
    this.layout = layerCacheLayout(type, dims)
    const ratio = cfg.compressRatios[layer]
    this.windowInv = windowInvFreqs(cfg, ratio)
    this.wkv = prepareMxfp8(weights.wkv)
    const ws = [weights.compressor, weights.indexerCompressor].filter((c): c is MlxCompressorWeights => c !== null)
    if (ws.length !== this.layout.pools.length) throw new PdBridgeError(`mlx-cpu cache path: layer ${layer} has ${ws.length} compressors, a ${type} layer ${this.layout.pools.length}`)
    this.pools = ws.map((w, j) => {
      const p = this.layout.pools[j]
      if (w.ratio !== p.ratio || w.dim !== p.dim || w.width !== p.width) {
        throw new PdBridgeError(`mlx-cpu cache path: layer ${layer} ${p.name} weights are ratio ${w.ratio} dim ${w.dim} width ${w.width}, the layout ${p.ratio}/${p.dim}/${p.width}`)
      }
      return {
        w,
        kv: prepareAffine(w.wkv, cfg.rounding),
        gate: prepareAffine(w.wgate, cfg.rounding),
        inv: poolInvFreqs(cfg, w.ratio, w.dim),
      }
    })
  }

  /** An empty cache of this layer's layout. */
  makeCache (): LayerCache {
    return LayerCache.fromLayout(this.layout)
  }

  /**
   * Take the attention input rows x [n, hidden] at positions start..start+n-1 into `cache`. MLX's
   * model holds its attention input in bf16: values that are not bf16 are rounded to nearest even
   * first, as `astype(bfloat16)` would.
   */
  updateCache (x: Float32Array, n: number, start: number, cache: LayerCache): void {
    const { cfg } = this
    const h = cfg.hiddenSize
    const d = cfg.headDim
    // bf16 rounding as bf16-round.ts's, except that a NaN keeps its sign: the quantized matmuls
    // give the positive quiet NaN for any NaN input, so no output can tell.
    const xb = roundBf16Array(x.slice(0, n * h))
    // Only the rows the window keeps need their norm and rope (both are per row).
    const keep = Math.min(n, cache.windowRowsMax)
    const from = n - keep
    const kv = mlxRmsNormRows(mxfp8MatmulNative(xb.subarray(from * h), keep, this.wkv, cfg.rounding), d, this.weights.kvNorm, cfg.rmsNormEps, cfg.rounding)
    mlxRopeRowsNative(kv, keep, d, this.windowInv, start + from, cfg.rounding)
    cache.pushWindow(kv, keep)
    const states = [cache.compressor, cache.indexer].filter((s): s is CompressorState => s !== null)
    states.forEach((state, j) => {
      const p = this.pools[j]
      const pkv = affineMatmulNative(xb, n, p.kv, cfg.rounding)
      const pgate = affineMatmulNative(xb, n, p.gate, cfg.rounding)
      this.feedPool(state, p, pkv, pgate, n)
    })
  }

  /** The buffered rows then the chunk's: pool every window that completes, keep the rest buffered. */
  private feedPool (state: CompressorState, p: PreparedPool, kv: Float32Array, gate: Float32Array, n: number): void {
    const { ratio, width, dim } = state
    const held = state.bufferLength
    const total = held + n
    const windows = Math.floor(total / ratio)
    if (windows === 0) {
      state.bufferKv.set(kv.subarray(0, n * width), held * width)
      state.bufferGate.set(gate.subarray(0, n * width), held * width)
      state.bufferLength = total
      return
    }
    // Rows [prev window (overlap, when one exists)] [buffered] [chunk].
    const prev = state.overlap && state.prevWindowKv !== null && state.prevWindowGate !== null
    const lead = prev ? ratio : 0
    const rows = lead + total
    const allKv = new Float32Array(rows * width)
    const allGate = new Float32Array(rows * width)
    if (prev) { allKv.set(state.prevWindowKv!); allGate.set(state.prevWindowGate!) }
    allKv.set(state.bufferKv.subarray(0, held * width), lead * width)
    allGate.set(state.bufferGate.subarray(0, held * width), lead * width)
    allKv.set(kv.subarray(0, n * width), (lead + held) * width)
    allGate.set(gate.subarray(0, n * width), (lead + held) * width)
    const pooledRows = (lead + windows * ratio) * width
    const entries = poolWindows(p.w, this.cfg, allKv.subarray(0, pooledRows), allGate.subarray(0, pooledRows), windows, state.entryCount, prev, p.inv, NATIVE_POOL_KERNELS)
    for (let i = 0; i < windows; i++) state.entries.append(entries.subarray(i * dim, (i + 1) * dim))
    const used = lead + windows * ratio
    if (state.overlap) {
      state.prevWindowKv = allKv.slice((used - ratio) * width, used * width)
      state.prevWindowGate = allGate.slice((used - ratio) * width, used * width)
      this.deriveCarry(state, p)
    }
    const left = rows - used
    state.bufferKv.set(allKv.subarray(used * width, rows * width))
    state.bufferGate.set(allGate.subarray(used * width, rows * width))
    state.bufferLength = left
  }

  /**
   * The engine's overlap carry (lane A of the last window, its gate with the position bias) in
   * MLX's rounding of `gate + ape`: what the next window's pooling reads, and what a carry file holds.
   */
  private deriveCarry (state: CompressorState, p: PreparedPool): void {
    const { ratio, dim, width } = state
    const gated = rounder(this.cfg.rounding.pooling.overlapGate)
    const kvCarry = new Float32Array(ratio * dim)
    const gateCarry = new Float32Array(ratio * dim)
    for (let r = 0; r < ratio; r++) {
      for (let c = 0; c < dim; c++) {
        kvCarry[r * dim + c] = state.prevWindowKv![r * width + c]
        gateCarry[r * dim + c] = gated(state.prevWindowGate![r * width + c] + p.w.ape[r * width + c])
      }
    }
    state.overlapKv = kvCarry
    state.overlapGate = gateCarry
  }
}

// The capture hook's computation, engine-agnostic and in memory: fed each layer's attention input
// rows in chunks of any size and alignment, it keeps that layer's cache (window rows, pools,
// overlap carries, partial-window buffers) by running the engine's own kv path
// (Attention.updateCache) with the sidecar's weights. Chunks of one layer must be contiguous; layers
// are independent of each other, so they may be fed in any interleaving. With `blockSize`, every
// feed is split at the multiples b of the block size and each layer copies its boundary snapshot
// at b (boundary.ts); chunk invariance makes the split exact.
import { PdBridgeError } from '../errors.ts'
import { ModelCache, type DumpTensor, type LayerCache } from '../model/engine/cache.ts'
import type { BoundarySnapshot } from '../wire/boundary.ts'
import { takeBoundarySnapshot } from './boundary.ts'
import type { KvPathModel } from './kv-path.ts'

/** Options of a PoolingHook. */
export interface PoolingHookOptions {
  /** Record a boundary snapshot of every layer at each multiple of this many tokens (none when absent). */
  blockSize?: number
  /**
   * Hand each boundary snapshot here the moment it is taken instead of keeping it (a streaming
   * capture writes it out at once); `boundaries()` then stays empty.
   */
  onBoundary?: (layer: number, snapshot: BoundarySnapshot) => void
  /**
   * Continue this cache instead of starting empty (a warm-extended prompt: the decoder's cache at a
   * block boundary P, mounted from a carry): every layer starts at P and takes rows from P on. The
   * hook owns it from here (it is advanced in place).
   */
  resume?: ModelCache
}

/** Per-layer cache state built from attention inputs. */
export class PoolingHook {
  private readonly states: Array<LayerCache | null>
  private readonly positions: number[]
  private readonly snapshots: BoundarySnapshot[][]
  /** The snapshot interval, or undefined when the hook records none. */
  readonly blockSize: number | undefined
  private readonly onBoundary: PoolingHookOptions['onBoundary']

  constructor (private readonly kv: KvPathModel, options: PoolingHookOptions = {}) {
    const bs = options.blockSize
    if (bs !== undefined && (!Number.isSafeInteger(bs) || bs < 1)) throw new PdBridgeError(`capture hook: blockSize must be a positive integer, got ${String(bs)}`)
    this.blockSize = bs
    this.onBoundary = options.onBoundary
    const resume = options.resume
    if (resume !== undefined && resume.layers.length !== kv.layers.length) {
      throw new PdBridgeError(`capture hook: the cache to continue has ${resume.layers.length} layers, the sidecar ${kv.layers.length}`)
    }
    this.states = resume?.layers.slice() ?? kv.layers.map((attention) => attention.makeCache())
    this.positions = kv.layers.map(() => resume?.tokenCount ?? 0)
    this.snapshots = kv.layers.map(() => [])
  }

  /** Number of layers. */
  get numLayers (): number {
    return this.states.length
  }

  /** Tokens layer `layer` has taken so far (its next position). */
  position (layer: number): number {
    this.checkLayer(layer)
    return this.positions[layer]
  }

  /**
   * Take `count` rows of layer `layer`'s attention input ([count, hidden] at the front of `rows`,
   * which is only read) for positions startPos..startPos+count-1. startPos must be the layer's
   * current position. Bad input is a PdBridgeError and changes nothing.
   */
  feed (layer: number, startPos: number, rows: Float32Array, count: number): void {
    const state = this.live(layer)
    const hidden = this.kv.hiddenSize
    if (!Number.isSafeInteger(count) || count < 1) throw new PdBridgeError(`capture hook: layer ${layer}: count must be a positive integer, got ${String(count)}`)
    if (startPos !== this.positions[layer]) {
      throw new PdBridgeError(`capture hook: layer ${layer}: rows start at position ${String(startPos)} but the layer holds ${this.positions[layer]} tokens; one layer's chunks must be contiguous`)
    }
    if (!(rows instanceof Float32Array) || rows.length < count * hidden) {
      const found = rows instanceof Float32Array ? `${rows.length} values` : rows === null ? 'null' : typeof rows
      throw new PdBridgeError(`capture hook: layer ${layer}: expected a Float32Array of at least ${count} x ${hidden} = ${count * hidden} values, found ${found}`)
    }
    if (startPos + count > this.kv.maxPositionEmbeddings) {
      throw new PdBridgeError(`capture hook: layer ${layer}: positions up to ${startPos + count} exceed the sidecar's max_position_embeddings (${this.kv.maxPositionEmbeddings})`)
    }
    const bs = this.blockSize
    const end = startPos + count
    let at = startPos
    while (at < end) {
      // Cut at the next boundary so the state there can be copied (exact: chunk invariance).
      const stop = bs === undefined ? end : Math.min(end, (Math.floor(at / bs) + 1) * bs)
      const x = rows.subarray((at - startPos) * hidden, (stop - startPos) * hidden)
      this.kv.layers[layer].updateCache(x, stop - at, at, state)
      at = stop
      this.positions[layer] = at
      if (bs !== undefined && at % bs === 0) {
        const snapshot = takeBoundarySnapshot(state, at)
        if (this.onBoundary === undefined) this.snapshots[layer].push(snapshot)
        else this.onBoundary(layer, snapshot)
      }
    }
  }

  /** Layer `layer`'s boundary snapshots so far, in boundary order (empty without blockSize). */
  boundaries (layer: number): readonly BoundarySnapshot[] {
    this.live(layer)
    return this.snapshots[layer]
  }

  /** Layer `layer`'s cache (live: it changes with later feeds). */
  layerCache (layer: number): LayerCache {
    return this.live(layer)
  }

  /**
   * Hand layer `layer`'s cache over and forget it and its boundary snapshots (take those first
   * with `boundaries`): the hook keeps no reference, later feeds are refused.
   */
  release (layer: number): LayerCache {
    const state = this.live(layer)
    this.states[layer] = null
    this.snapshots[layer] = []
    return state
  }

  /** Whether layer `layer` was released. */
  released (layer: number): boolean {
    this.checkLayer(layer)
    return this.states[layer] === null
  }

  /**
   * The caches as one ModelCache (every layer must hold the same number of tokens and none may be
   * released): its `tensors(prefix)` are the dump names the decoder and `dump` use.
   */
  toModelCache (): ModelCache {
    const n = this.positions[0]
    this.positions.forEach((p, i) => {
      if (p !== n) throw new PdBridgeError(`capture hook: layer ${i} holds ${p} tokens but layer 0 holds ${n}; a cache needs every layer at one length`)
    })
    const cache = new ModelCache(this.states.map((_, i) => this.live(i)))
    cache.tokenCount = n
    return cache
  }

  /** Every cache tensor under `prefix` (see toModelCache). */
  tensors (prefix: string): Map<string, DumpTensor> {
    return this.toModelCache().tensors(prefix)
  }

  private checkLayer (layer: number): void {
    if (!Number.isSafeInteger(layer) || layer < 0 || layer >= this.states.length) {
      throw new PdBridgeError(`capture hook: layer ${String(layer)} is not a layer index in [0, ${this.states.length})`)
    }
  }

  private live (layer: number): LayerCache {
    this.checkLayer(layer)
    const state = this.states[layer]
    if (state === null) throw new PdBridgeError(`capture hook: layer ${layer} was already written and released`)
    return state
  }
}

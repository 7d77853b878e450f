// Shared by the block-store suites: a tiny DeepSeek-V4-shaped model whose cache at any boundary is
// a pure function of (layer, position), stores opened with an event collector, and a bitwise
// payload comparison.
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Tensor } from '../../src/formats/safetensors/index.ts'
import { f32ToBf16 } from '../../src/numerics/bf16.ts'
import {
  BlockStore, deepseekV4BlockPayload, deepseekV4CacheLayout, deepseekV4StoreLayout, isTensor,
  type BlockPayload, type LayerPayload, type LayerSnapshot, type PlainState, type StateElement, type StoreEvent, type StoreLayout,
} from '../../src/decode/store/index.ts'

/** A fresh temporary directory, and a function that removes it. */
export async function tempDir (): Promise<{ dir: string, cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'pd-bridge-blocks-'))
  return { dir, cleanup: async () => await rm(dir, { recursive: true, force: true }) }
}

/** Sliding, CSA (ratio 4, two pools), HCA (ratio 8, one pool), CSA: every cache form DeepSeek-V4 has. */
export const TINY = {
  layerTypes: ['sliding_attention', 'compressed_sparse_attention', 'heavily_compressed_attention', 'compressed_sparse_attention'] as const,
  compressRatios: [0, 4, 8, 4],
  slidingWindow: 8,
}

/** Tokens per block in the tiny store (a multiple of every ratio, as 2048 is for the real model). */
export const BLOCK = 16

/** Entry width of the tiny model. */
export const DIM = 4

export const MODEL = '/models/tiny-dsv4'
export const GEOMETRY_A = 'a'.repeat(64)
export const GEOMETRY_B = 'b'.repeat(64)

export const SPECS = deepseekV4CacheLayout({ ...TINY, layerTypes: [...TINY.layerTypes] })

/** The tiny model's store layout, with overrides. */
export function tinyLayout (overrides: Partial<StoreLayout> = {}): StoreLayout {
  return { ...deepseekV4StoreLayout({ ...TINY, layerTypes: [...TINY.layerTypes] }, { modelName: MODEL, geometryFingerprint: GEOMETRY_A, blockSize: BLOCK }), ...overrides }
}

/** A distinct, exactly representable f32 for every (layer, part, row, column). */
function value (layer: number, part: number, row: number, col: number): number {
  return layer * 10000 + part * 1000 + row + col / 8
}

function f32Tensor (shape: number[], fill: (index: number[]) => number): Tensor {
  const n = shape.reduce((a, b) => a * b, 1)
  const out = new Float32Array(n)
  const idx = shape.map(() => 0)
  for (let i = 0; i < n; i++) {
    out[i] = fill(idx)
    for (let d = shape.length - 1; d >= 0; d--) {
      if (++idx[d] < shape[d]) break
      idx[d] = 0
    }
  }
  return { dtype: 'F32', shape, data: new Uint8Array(out.buffer) }
}

function bf16Tensor (shape: number[], fill: (index: number[]) => number): Tensor {
  const f = new Float32Array(f32Tensor(shape, fill).data.buffer)
  const codes = Uint16Array.from(f, (x) => f32ToBf16(x))
  return { dtype: 'BF16', shape, data: new Uint8Array(codes.buffer) }
}

/**
 * The tiny model's cache after `t` tokens, layer by layer. The window holds the last min(t, 8)
 * positions (bf16 keys, zero-width values as in DeepSeek-V4 where K = V); a pool of ratio r holds
 * floor(t / r) rows, each a function of its own index only (pools are append-only); its buffer holds
 * the t mod r tokens of the open window (None when empty); ratio-4 pools carry the last window.
 */
export function snapshotAt (t: number, layerOffset = 0): LayerSnapshot[] {
  return SPECS.map((spec) => {
    const L = spec.layer + layerOffset
    const rows = Math.min(t, spec.window)
    const rotating = {
      keys: bf16Tensor([1, 1, rows, DIM], ([, , r, c]) => value(L, 0, t - rows + r, c)),
      values: { dtype: 'BF16' as const, shape: [1, 1, rows, 0], data: new Uint8Array(0) },
      offset: t,
      maxSize: spec.window,
    }
    const pools = spec.poolRatios.map((ratio, j) => {
      const complete = Math.floor(t / ratio)
      const rem = t % ratio
      const start = t - rem
      return {
        bufKv: rem === 0 ? null : f32Tensor([1, rem, 2 * DIM], ([, k, c]) => value(L, 5 + j, start + k, c)),
        bufGate: rem === 0 ? null : f32Tensor([1, rem, 2 * DIM], ([, k, c]) => value(L, 7 + j, start + k, c)),
        pooled: f32Tensor([1, complete, DIM], ([, i, c]) => value(L, 1 + j, i, c)),
        prevWinKv: ratio === 4 && complete > 0 ? f32Tensor([1, 1, ratio, 2 * DIM], ([, , k, c]) => value(L, 9, (complete - 1) * ratio + k, c)) : null,
        prevWinGate: ratio === 4 && complete > 0 ? f32Tensor([1, 1, ratio, 2 * DIM], ([, , k, c]) => value(L, 10, (complete - 1) * ratio + k, c)) : null,
      }
    })
    return { rotating, pools }
  })
}

/** Block `b` (0-based) of the tiny model: the state at its end boundary, pools as deltas by default. */
export function blockPayload (b: number, pooling: 'delta' | 'full' = 'delta', layerOffset = 0): BlockPayload {
  const t = (b + 1) * BLOCK
  return deepseekV4BlockPayload(SPECS, snapshotAt(t, layerOffset), { tokenCount: t, blockSize: BLOCK, pooling })
}

/** What a restore to token `t` must give: every layer's full state at t. */
export function expectedCacheAt (t: number): BlockPayload {
  return deepseekV4BlockPayload(SPECS, snapshotAt(t), { tokenCount: t, blockSize: BLOCK, pooling: 'full' })
}

/** Deterministic token ids. */
export function tokens (n: number, seed = 1): number[] {
  return Array.from({ length: n }, (_, i) => (i * 7919 + seed * 104729) % 50021)
}

/** Open a store on `root` with the tiny layout (overridable) and collect its events. */
export async function openStore (root: string, layout: Partial<StoreLayout> = {}, maxSizeBytes?: number): Promise<{ store: BlockStore, events: StoreEvent[] }> {
  const events: StoreEvent[] = []
  const store = await BlockStore.open({ root, layout: tinyLayout(layout), maxSizeBytes, log: (e) => events.push(e) })
  return { store, events }
}

function sameBits (a: Tensor, b: Tensor): boolean {
  return a.dtype === b.dtype && a.shape.join(',') === b.shape.join(',') &&
    Buffer.compare(Buffer.from(a.data.buffer, a.data.byteOffset, a.data.byteLength), Buffer.from(b.data.buffer, b.data.byteOffset, b.data.byteLength)) === 0
}

function elementDiff (a: StateElement, b: StateElement, where: string): string | null {
  if (a === null || b === null) return a === b ? null : `${where}: ${a === null ? 'None' : 'value'} vs ${b === null ? 'None' : 'value'}`
  if (isTensor(a) || isTensor(b)) {
    if (!isTensor(a) || !isTensor(b)) return `${where}: tensor vs nested`
    return sameBits(a, b) ? null : `${where}: ${a.dtype} [${a.shape}] vs ${b.dtype} [${b.shape}] or different bits`
  }
  if (a.kind !== b.kind || a.className !== b.className || a.elements.length !== b.elements.length) return `${where}: nested ${a.kind}/${a.className}/${a.elements.length} vs ${b.kind}/${b.className}/${b.elements.length}`
  for (let k = 0; k < a.elements.length; k++) {
    const d = elementDiff(a.elements[k], b.elements[k], `${where}.${k}`)
    if (d !== null) return d
  }
  return null
}

function layerDiff (a: LayerPayload, b: LayerPayload, where: string): string | null {
  if (a.kind !== b.kind) return `${where}: ${a.kind} vs ${b.kind}`
  if (a.kind === 'placeholder') return null
  const subsA: PlainState[] = a.kind === 'cache-list' ? a.subs : [a]
  const subsB: PlainState[] = b.kind === 'cache-list' ? b.subs : b.kind === 'state' ? [b] : []
  if (subsA.length !== subsB.length) return `${where}: ${subsA.length} vs ${subsB.length} sub-states`
  for (let j = 0; j < subsA.length; j++) {
    const s = subsA[j]
    const t = subsB[j]
    if (s.className !== t.className || s.elements.length !== t.elements.length) return `${where}.${j}: ${s.className}/${s.elements.length} vs ${t.className}/${t.elements.length}`
    for (let k = 0; k < s.elements.length; k++) {
      const d = elementDiff(s.elements[k], t.elements[k], `${where}.${j}.${k}`)
      if (d !== null) return d
    }
  }
  return null
}

/** The first difference between two payloads' layers (bitwise on tensors), or null when identical. */
export function payloadDiff (a: { layers: LayerPayload[] }, b: { layers: LayerPayload[] }): string | null {
  if (a.layers.length !== b.layers.length) return `${a.layers.length} vs ${b.layers.length} layers`
  for (let i = 0; i < a.layers.length; i++) {
    const d = layerDiff(a.layers[i], b.layers[i], `layer ${i}`)
    if (d !== null) return d
  }
  return null
}

/**
 * Block `b` with a large window tensor (rows x `width` f32, about `width` x 32 bytes), so a write
 * takes long enough to be killed in the middle. Values are a function of (b, index).
 */
export function bigBlockPayload (b: number, width: number): BlockPayload {
  const p = blockPayload(b)
  const values = new Float32Array(8 * width)
  for (let i = 0; i < values.length; i++) values[i] = b * 1e6 + i
  const keys: Tensor = { dtype: 'F32', shape: [1, 1, 8, width], data: new Uint8Array(values.buffer) }
  const window = p.layers[0] as PlainState
  p.layers[0] = { ...window, elements: [keys, { dtype: 'F32', shape: [1, 1, 8, 0], data: new Uint8Array(0) }] }
  return p
}

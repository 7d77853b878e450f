// Restored-from-blocks cache vs the native cache at the same boundary, array by array, bit by bit,
// naming for every differing array the block tensor it was restored from.
import { PdBridgeError } from '../../errors.ts'
import type { DeepseekV4Config } from '../../model/config.ts'
import type { DumpTensor, ModelCache } from '../../model/engine/index.ts'

/** The comparison of one cache array. */
export interface ArrayComparison {
  /** The array's dump name without prefix: `layers.1.compressor.compressed_kv`. */
  name: string
  /** Shape of the restored and of the native array. */
  shape: number[]
  nativeShape: number[]
  identical: boolean
  /** Values whose bits differ (all of them when the shapes differ). */
  differing: number
  total: number
  /** The first differing value: flat index and both values. */
  first?: { index: number, restored: number | bigint, native: number | bigint }
  /** The block tensor the differing value was restored from, when it can be named. */
  source?: string
}

function bitsOf (t: DumpTensor): Uint32Array | BigInt64Array {
  return t.dtype === 'I64' ? t.data : new Uint32Array(t.data.buffer, t.data.byteOffset, t.data.length)
}

// Which block tensor holds a cache array: windows, buffers and carries come from the last block,
// pooled rows from the block whose token range produced them.
function sourceOf (cfg: DeepseekV4Config, name: string, index: number, tokenCount: number, blockSize: number): string | undefined {
  const m = /^layers\.(\d+)\.(window|(compressor|indexer)\.(compressed_kv|entry_count|buffer_kv|buffer_gate|overlap_kv|overlap_gate))$/.exec(name)
  if (m === null) return undefined
  const layer = Number(m[1])
  const sliding = cfg.layerTypes[layer] === 'sliding_attention'
  const lastBlock = Math.max(0, Math.ceil(tokenCount / blockSize) - 1)
  if (m[2] === 'window') return `block ${lastBlock} tensor ${sliding ? `layer_${layer}_state_0` : `layer_${layer}_sub_0_state_0`} (window keys)`
  const sub = m[3] === 'compressor' ? 1 : 2
  const element = { buffer_kv: 0, buffer_gate: 1, compressed_kv: 2, entry_count: 2, overlap_kv: 3, overlap_gate: 4 }[m[4]] ?? 2
  let block = lastBlock
  if (m[4] === 'compressed_kv') {
    const dim = m[3] === 'indexer' ? cfg.indexHeadDim : cfg.headDim
    const ratio = cfg.compressRatios[layer]
    block = Math.floor(Math.floor(index / dim) * ratio / blockSize)
  }
  return `block ${block} tensor layer_${layer}_sub_${sub}_state_${element}`
}

/**
 * Compare every array of two caches (names from `cache.tensors`) bit for bit: F32 by their bits,
 * the I64 entry counts by value, plus the token counts. `blockSize` lets a difference name the block
 * tensor it came from.
 */
export function compareCaches (cfg: DeepseekV4Config, restored: ModelCache, native: ModelCache, blockSize?: number): ArrayComparison[] {
  const a = restored.tensors('c')
  const b = native.tensors('c')
  const out: ArrayComparison[] = [{
    name: 'token_count',
    shape: [1],
    nativeShape: [1],
    identical: restored.tokenCount === native.tokenCount,
    differing: restored.tokenCount === native.tokenCount ? 0 : 1,
    total: 1,
    ...(restored.tokenCount === native.tokenCount ? {} : { first: { index: 0, restored: restored.tokenCount, native: native.tokenCount } }),
  }]
  for (const key of new Set([...a.keys(), ...b.keys()])) {
    const name = key.slice('c.'.length)
    const x = a.get(key)
    const y = b.get(key)
    if (x === undefined || y === undefined) {
      const t = (x ?? y) as DumpTensor
      out.push({ name, shape: x?.shape ?? [], nativeShape: y?.shape ?? [], identical: false, differing: t.data.length, total: t.data.length })
      continue
    }
    const sameShape = x.dtype === y.dtype && x.shape.length === y.shape.length && x.shape.every((d, i) => d === y.shape[i])
    const total = Math.max(x.data.length, y.data.length)
    let differing = sameShape ? 0 : total
    let first: ArrayComparison['first']
    if (sameShape) {
      const p = bitsOf(x)
      const q = bitsOf(y)
      for (let i = 0; i < p.length; i++) {
        if (p[i] !== q[i]) {
          if (differing++ === 0) first = { index: i, restored: x.data[i], native: y.data[i] }
        }
      }
    }
    const comparison: ArrayComparison = { name, shape: x.shape, nativeShape: y.shape, identical: differing === 0, differing, total }
    if (first !== undefined) comparison.first = first
    if (!comparison.identical && blockSize !== undefined) {
      const source = sourceOf(cfg, name, first?.index ?? 0, restored.tokenCount, blockSize)
      if (source !== undefined) comparison.source = source
    }
    out.push(comparison)
  }
  return out
}

/** One report line for a comparison. */
export function describeComparison (c: ArrayComparison): string {
  const shape = `[${c.shape.join(',')}]`
  if (c.identical) return `${c.name} ${shape}: bit-exact`
  const from = c.source === undefined ? '' : ` (restored from ${c.source})`
  if (c.shape.join(',') !== c.nativeShape.join(',')) return `${c.name}: DIFFERS: restored shape ${shape}, native [${c.nativeShape.join(',')}]${from}`
  const first = c.first === undefined ? '' : `, first at element ${c.first.index}: restored ${String(c.first.restored)}, native ${String(c.first.native)}`
  return `${c.name} ${shape}: DIFFERS in ${c.differing} of ${c.total} values${first}${from}`
}

/** Read a token file: a JSON array of token ids, or integers separated by whitespace or commas. */
export function parseTokenText (text: string, file: string): number[] {
  const trimmed = text.trim()
  let values: unknown[]
  if (trimmed.startsWith('[')) {
    try {
      values = JSON.parse(trimmed) as unknown[]
    } catch (e) {
      throw new PdBridgeError(`${file}: not valid JSON: ${(e as Error).message}`)
    }
    if (!Array.isArray(values)) throw new PdBridgeError(`${file}: expected a JSON array of token ids`)
  } else {
    values = trimmed.length === 0 ? [] : trimmed.split(/[\s,]+/).map((w) => (/^\d+$/.test(w) ? Number(w) : w))
  }
  values.forEach((v, i) => {
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) throw new PdBridgeError(`${file}: token ${i} is ${JSON.stringify(v)}, not a non-negative integer token id`)
  })
  if (values.length === 0) throw new PdBridgeError(`${file}: no token ids`)
  return values as number[]
}

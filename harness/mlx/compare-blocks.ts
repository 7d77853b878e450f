// Our blocks against blocks oMLX's own prefix cache wrote (harness/fixtures/mlx/omlx-blocks/, made by
// harness/mlx/make-prefix-cache-proof.sh): the cases of prefix-cache-proof.json written again by our
// code, and the comparison block against block. Shared by suites/mlx/omlx-blocks.test.ts and
// harness/mlx/summarize.ts.
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { readMlxCpuCacheWeights } from '../../src/capture/mlx-cpu/index.ts'
import { DecoderPrefixCache, cacheToBlockPayload } from '../../src/decode/prefix-cache/index.ts'
import { blockPath } from '../../src/decode/store/index.ts'
import { readSafetensors, type Tensor } from '../../src/formats/safetensors/index.ts'
import type { DeepseekV4Config } from '../../src/model/config.ts'
import type { DeepseekV4Engine } from '../../src/model/engine/index.ts'
import { decodeBf16 } from '../../src/numerics/bf16.ts'
import { combine, distance, showHistogram, type Distance } from './distance.ts'
import { mlxCpuBlockCache, mlxAttnInput } from './mlx-cpu-block.ts'

export interface StoreRecord {
  restored: boolean
  blocks: number
  tokens_restored: number
  logits_bit_identical_steps: number
  logits_steps: number
  logits_rel_error_max: number
  logits_max_abs: number
  greedy_equal: boolean
}

export interface ProofCase {
  checkpoint: string
  model_name: string
  block_size: number
  tokens: number
  boundary: number
  sources: Record<string, unknown>
  native: { greedy: number[] }
  stores: Record<string, StoreRecord>
}

/** The proof's two cases: which prompt, and which of our paths writes the blocks. */
export const PROOF_CASES = {
  'tiny-t301-mxq': { tokens: 'tokens-301.json', ours: 'mlx-cpu' },
  'tiny-t777-f32': { tokens: 'tokens-777.json', ours: 'f32' },
} as const
export type ProofCaseName = keyof typeof PROOF_CASES

/** Our additions to oMLX's metadata (its reader ignores them), and what differs on every write. */
export const OURS_ONLY = ['geometry_fingerprint', 'content_sha256']
export const PER_WRITE = ['created_at']

export function readProof (fixtures: string): { cases: Record<ProofCaseName, ProofCase> } {
  return JSON.parse(readFileSync(join(fixtures, 'mlx/prefix-cache-proof.json'), 'utf8')) as { cases: Record<ProofCaseName, ProofCase> }
}

export interface Block { metadata: Record<string, string>, tensors: Map<string, Tensor> }

export async function readBlock (path: string): Promise<Block> {
  const { metadata, tensors } = await readSafetensors(path)
  return { metadata, tensors }
}

/** oMLX's blocks of a case, by block hash. */
export async function omlxBlocks (fixtures: string, name: ProofCaseName): Promise<Map<string, Block>> {
  const root = join(fixtures, 'mlx/omlx-blocks', name)
  const out = new Map<string, Block>()
  for (const sub of readdirSync(root)) {
    for (const f of readdirSync(join(root, sub))) out.set(f.replace(/\.safetensors$/, ''), await readBlock(join(root, sub, f)))
  }
  return out
}

export function tokensOf (fixtures: string, file: string, take: number): number[] {
  const parsed = JSON.parse(readFileSync(join(fixtures, file), 'utf8')) as number[] | { ids: number[] }
  return (Array.isArray(parsed) ? parsed : parsed.ids).slice(0, take)
}

/** The mlx-cpu block of tiny-t301-mxq: our cache path over MLX's recorded attention inputs, our mapping, our store. */
export async function writeMlxCpuBlock (fixtures: string, cfg: DeepseekV4Config, storeRoot: string, c: ProofCase,
  edit?: (cache: ReturnType<typeof mlxCpuBlockCache>) => void): Promise<{ hash: string, path: string }> {
  const weights = await readMlxCpuCacheWeights(join(fixtures, 'mlx/tiny-mxq-cache-weights.safetensors'))
  const inputs = await readSafetensors(join(fixtures, 'mlx/omlx-blocks/tiny-t301-mxq-attn-inputs.safetensors'))
  if (inputs.metadata.checkpoint_sha256 !== weights.metadata.checkpoint_sha256) throw new Error('compare-blocks: attention inputs and cache weights come from different checkpoints')
  const B = c.boundary
  const cache = mlxCpuBlockCache(cfg, weights, (layer) => mlxAttnInput(inputs.tensors, cfg, layer, B), B)
  edit?.(cache)
  const pc = await DecoderPrefixCache.open({ storeRoot, modelName: c.model_name, cfg, profile: 'decoder', blockSize: c.block_size, log: () => {} })
  const [hash] = pc.store.keysFor(tokensOf(fixtures, PROOF_CASES['tiny-t301-mxq'].tokens, c.tokens))
  await pc.store.put(hash, cacheToBlockPayload(cfg, cache, 0, B, { storage: 'bf16-if-exact' }), { parentHash: null })
  return { hash, path: blockPath(pc.store.root, hash) }
}

/** The f32 blocks of tiny-t777-f32: the decoder's own prefix cache over our f32 engine. */
export async function writeF32Blocks (fixtures: string, engine: DeepseekV4Engine, storeRoot: string, c: ProofCase): Promise<Array<{ hash: string, path: string }>> {
  const pc = await DecoderPrefixCache.open({ storeRoot, modelName: c.model_name, cfg: engine.config, profile: 'f32', blockSize: c.block_size, engine, log: () => {} })
  const stored = await pc.prefillAndStore(engine, tokensOf(fixtures, PROOF_CASES['tiny-t777-f32'].tokens, c.tokens))
  return stored.storedBlocks.map((b) => ({ hash: b.hash, path: blockPath(pc.store.root, b.hash) }))
}

function values (t: Tensor): { v: Float32Array, dtype: 'F32' | 'BF16' } | null {
  const bytes = t.data.buffer.slice(t.data.byteOffset, t.data.byteOffset + t.data.byteLength)
  if (t.dtype === 'F32') return { v: new Float32Array(bytes), dtype: 'F32' }
  if (t.dtype === 'BF16') return { v: decodeBf16(new Uint16Array(bytes)), dtype: 'BF16' }
  return null
}

function sameBytes (a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i])
}

/** A RotatingKVCache's keys: a sliding layer's state 0, or a CacheList's sub 0 state 0. */
export const isWindow = (name: string): boolean => /^layer_\d+(_sub_0)?_state_0$/.test(name)

export interface Comparison {
  metadata: string[]
  structure: string[]
  /** Per float tensor: its distance over every element, and over all but the window's oldest row. */
  tensors: Array<{ name: string, all: Distance, readRows: Distance }>
  /** Non-float tensors (the int64 row ranges): bit-identical or not. */
  exact: Array<{ name: string, identical: boolean }>
}

export function compareBlocks (ours: Block, theirs: Block): Comparison {
  const metadata: string[] = []
  for (const k of new Set([...Object.keys(ours.metadata), ...Object.keys(theirs.metadata)])) {
    if (PER_WRITE.includes(k)) continue
    if (OURS_ONLY.includes(k)) {
      if (ours.metadata[k] === undefined || theirs.metadata[k] !== undefined) metadata.push(`${k}: expected in ours only`)
      continue
    }
    if (ours.metadata[k] !== theirs.metadata[k]) metadata.push(`${k}: ours ${JSON.stringify(ours.metadata[k])}, oMLX ${JSON.stringify(theirs.metadata[k])}`)
  }
  const structure: string[] = []
  const tensors: Comparison['tensors'] = []
  const exact: Comparison['exact'] = []
  for (const name of new Set([...ours.tensors.keys(), ...theirs.tensors.keys()])) {
    const a = ours.tensors.get(name)
    const b = theirs.tensors.get(name)
    if (a === undefined || b === undefined) { structure.push(`${name}: only in ${a === undefined ? 'oMLX' : 'ours'}`); continue }
    if (a.dtype !== b.dtype || a.shape.join(',') !== b.shape.join(',')) { structure.push(`${name}: ours ${a.dtype} [${a.shape}], oMLX ${b.dtype} [${b.shape}]`); continue }
    const va = values(a)
    const vb = values(b)
    if (va === null || vb === null) { exact.push({ name, identical: sameBytes(a.data, b.data) }); continue }
    const all = distance(va.v, vb.v, va.dtype)
    let readRows = all
    if (isWindow(name) && a.shape.length === 4 && a.shape[2] > 1) {
      const row = a.shape[3]
      readRows = distance(va.v.subarray(row), vb.v.subarray(row), va.dtype)
    }
    tensors.push({ name, all, readRows })
  }
  return { metadata, structure, tensors, exact }
}

/** Whether a comparison found every bit the same (metadata but created_at and our two keys, every tensor). */
export function identical (c: Comparison, exceptUnreadWindowRow = false): boolean {
  return c.metadata.length === 0 && c.structure.length === 0 && c.exact.every((e) => e.identical) &&
    c.tensors.every((t) => (exceptUnreadWindowRow ? t.readRows : t.all).identical === (exceptUnreadWindowRow ? t.readRows : t.all).elements)
}

/** One line for the blocks, then one per tensor whose bits differ. */
export function describeComparisons (label: string, cs: readonly Comparison[]): string[] {
  const t = cs.flatMap((c) => c.tensors)
  const all = combine(t.map((x) => x.all))
  const read = combine(t.map((x) => x.readRows))
  const lines = [`${label}: ${t.length} float tensors over ${cs.length} block(s); all elements ${all.identical}/${all.elements} identical ` +
    `(max ulp ${all.maxUlp}; ${showHistogram(all.histogram)}); without the windows' oldest row ${read.identical}/${read.elements} ` +
    `(max ulp ${read.maxUlp}, rel ${read.relError.toExponential(2)}; ${showHistogram(read.histogram)})`]
  for (const x of t) {
    if (x.all.identical !== x.all.elements) {
      lines.push(`  ${x.name}: ${x.all.identical}/${x.all.elements} identical, max ulp ${x.all.maxUlp} (${showHistogram(x.all.histogram)}); rows read ${x.readRows.identical}/${x.readRows.elements}, rel ${x.readRows.relError.toExponential(2)}`)
    }
  }
  return lines
}

/** One element whose bits differ: the tensor, its index (one number per dimension) and both values. */
export interface ElementDifference { tensor: string, index: number[], ours: number, theirs: number }

function bitsOf (t: Tensor): Uint16Array | Uint32Array | null {
  const bytes = t.data.buffer.slice(t.data.byteOffset, t.data.byteOffset + t.data.byteLength)
  return t.dtype === 'F32' ? new Uint32Array(bytes) : t.dtype === 'BF16' ? new Uint16Array(bytes) : null
}

function unravel (flat: number, shape: readonly number[]): number[] {
  const index = shape.map(() => 0)
  for (let d = shape.length - 1; d >= 0; d--) { index[d] = flat % shape[d]; flat = Math.floor(flat / shape[d]) }
  return index
}

/**
 * Every element of two float tensors (same dtype and shape: compareBlocks' structure check) whose
 * bits differ, in storage order; an empty list when they are bit-identical.
 */
export function elementDifferences (name: string, ours: Tensor, theirs: Tensor): ElementDifference[] {
  const a = bitsOf(ours)
  const b = bitsOf(theirs)
  const va = values(ours)
  const vb = values(theirs)
  if (a === null || b === null || va === null || vb === null || a.length !== b.length) throw new Error(`${name}: not two float tensors of one dtype and size`)
  const out: ElementDifference[] = []
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) out.push({ tensor: name, index: unravel(i, ours.shape), ours: va.v[i], theirs: vb.v[i] })
  return out
}

/** `name[i, j, ...]: ours X, oMLX Y` (values in full precision). */
export function showDifference (d: ElementDifference): string {
  return `${d.tensor}[${d.index.join(', ')}]: ours ${d.ours}, oMLX ${d.theirs}`
}

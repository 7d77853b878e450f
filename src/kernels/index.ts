// The kernels' public API: native fast paths (native/) with their bit-exact TypeScript references.
import { NumericsError } from '../errors.ts'
import * as attentionRef from './attention.ts'
import { attentionFlagBits, checkAttention } from './attention.ts'
import type { AttentionOptions } from './attention.ts'
import * as bf16ArraysRef from './bf16-arrays.ts'
import { checkDecodeBf16Array, checkExactBf16Codes } from './bf16-arrays.ts'
import { FMATH_CODES } from './fmath.ts'
import type { FmathName } from './fmath.ts'
import * as fmathArrayRef from './fmath-array.ts'
import { checkFmathArray } from './fmath-array.ts'
import * as hcCollapseRef from './hc-collapse.ts'
import { checkHcCollapse } from './hc-collapse.ts'
import * as hcPostRef from './hc-post.ts'
import { checkHcPost } from './hc-post.ts'
import * as indexerRef from './indexer.ts'
import { checkIndexer } from './indexer.ts'
import * as mxRoundTripRef from './mx-round-trip.ts'
import { checkMxRoundTrip, MX_ELEMENT_CODES, type MxElement } from './mx-round-trip.ts'
import * as groupedRef from './matmul-grouped.ts'
import { checkMatmulGrouped, type MatmulGroup } from './matmul-grouped.ts'
import * as moeExpertsRef from './moe-experts.ts'
import { checkMoeExperts, type MoeExpertsOptions } from './moe-experts.ts'
import { loadNativeKernels, MATMUL_ORDER_CODES, PACKED_SEQUENTIAL_FMA_CODE } from './native.ts'
import { checkMatmulPacked, checkPack, packReference, unpack, type PackedWeight } from './packed.ts'
import * as poolRef from './pool.ts'
import { checkPool, poolFlagBits } from './pool.ts'
import type { PoolOptions } from './pool.ts'
import * as ref from './reference.ts'
import type { MatmulOptions } from './reference.ts'
import * as ropeRef from './rope-rows.ts'
import { checkRopeRows } from './rope-rows.ts'
import type { RopeRowsOptions } from './rope-rows.ts'
import * as topkRowsRef from './topk-rows.ts'
import { checkTopkRows, type TopkRows } from './topk-rows.ts'
import * as unweightedNormRef from './unweighted-norm.ts'
import { checkUnweightedNorm } from './unweighted-norm.ts'
import { checkMatmul, checkRmsNorm } from './validate.ts'

export type { MatmulOptions, AccumulationOrder } from './reference.ts'
export type { MatmulGroup } from './matmul-grouped.ts'
export type { ExpertOps, MoeExpertsOptions } from './moe-experts.ts'
export { expertsStage, swigluRows } from './moe-experts.ts'
export type { AttentionOptions } from './attention.ts'
export type { PoolOptions } from './pool.ts'
export type { RopeRowsOptions } from './rope-rows.ts'
export type { FmathName } from './fmath.ts'
export type { MxElement } from './mx-round-trip.ts'
export type { TopkOptions } from './topk.ts'
export { ACCUMULATION_ORDERS } from './validate.ts'
export { dotInKernelOrder, dotBlocks128, dotLanes8Fma, dotSequentialFma, KERNEL_LANES, ORDER_BLOCK } from './order.ts'
export { fmaF32 } from './fma.ts'
export { PACKED_STRIP, packedLength, type PackedWeight } from './packed.ts'
export { CANONICAL_NAN_BITS } from './output.ts'
export { loadNativeKernels, DEFAULT_ADDON_PATH } from './native.ts'
export { expF32, logF32, log1pF32, sigmoidF32, softplusF32, siluF32, sqrtsoftplusF32, FMATH_FUNCTIONS } from './fmath.ts'
export { topkIndices } from './topk.ts'
export { topkRow, type TopkRows } from './topk-rows.ts'

/**
 * y[m, n] = x[m, k] · W[n, k]^T (W an nn.Linear weight, row-major [out, in], float32), native.
 * Bit-identical to reference.matmulF32 for every input, whatever m, n or the thread count.
 * opts.order picks the accumulation order ('lanes8', the default, 'blocks128', 'lanes8-fma' or
 * 'sequential-fma').
 * Writes into `out` when given (length m * n, not overlapping x or w) and returns it.
 */
export function matmulF32 (x: Float32Array, m: number, k: number, w: Float32Array, n: number, out?: Float32Array, opts?: MatmulOptions): Float32Array {
  const a = checkMatmul('matmulF32', x, m, k, w, n, out, opts, 'Float32Array')
  return loadNativeKernels().matmulF32(a.x, a.m, a.k, a.w, a.n, a.out, a.roundBf16, MATMUL_ORDER_CODES[a.order])
}

/**
 * The same product with W as bf16 codes (Uint16Array), widened exactly to float32, native.
 * Bit-identical to reference.matmulBf16, and to matmulF32 on the widened weights.
 */
export function matmulBf16 (x: Float32Array, m: number, k: number, w: Uint16Array, n: number, out?: Float32Array, opts?: MatmulOptions): Float32Array {
  const a = checkMatmul('matmulBf16', x, m, k, w, n, out, opts, 'Uint16Array')
  return loadNativeKernels().matmulBf16(a.x, a.m, a.k, a.w, a.n, a.out, a.roundBf16, MATMUL_ORDER_CODES[a.order])
}

/**
 * matmulBf16 of several groups of one shape in one native call (a MoE layer's experts, each on its
 * own rows): group g's out [m, n] = x [m, k] · w [n, k]^T; returns the outputs. Each output is
 * bit-identical to matmulBf16 of that group alone; the threads share the groups' columns.
 */
export function matmulBf16Grouped (groups: readonly MatmulGroup[], k: number, n: number, opts?: MatmulOptions): Float32Array[] {
  const a = checkMatmulGrouped('matmulBf16Grouped', groups, k, n, opts)
  loadNativeKernels().matmulBf16Grouped(a.xs, a.ms, a.k, a.ws, a.n, a.outs, a.roundBf16, MATMUL_ORDER_CODES[a.order])
  return a.outs
}

/**
 * A MoE layer's routed experts after the router, native (docs/kernels.md, "MoE experts"): x [n,
 * hidden], expert e's gate_up gateUps[e] [2 inter, hidden] and down downs[e] [hidden, inter] as
 * bf16 codes, picks and weights [n, topk]; returns the weighted sum [n, hidden] before its cast.
 * Bit-identical to reference.moeExperts.
 */
export function moeExperts (x: Float32Array, n: number, hidden: number, inter: number, gateUps: readonly Uint16Array[], downs: readonly Uint16Array[],
  picks: Int32Array, weights: Float32Array, topk: number, limit: number, opts?: MoeExpertsOptions): Float32Array {
  const a = checkMoeExperts('moeExperts', x, n, hidden, inter, gateUps, downs, picks, weights, topk, limit, opts)
  const routed = new Float32Array(a.n * a.hidden)
  loadNativeKernels().moeExperts(a.x, a.n, a.hidden, a.inter, a.gateUps, a.downs, a.picks, a.weights, a.topk, a.limit, a.roundBf16, MATMUL_ORDER_CODES[a.order], routed)
  return routed
}

/**
 * W [n, k] (float32 or bf16 codes) packed once in strips of 16 rows for matmulPacked, native. The
 * codes are moved, not converted; packReference gives the same arrays.
 */
export function packSequentialFma (w: Float32Array | Uint16Array, n: number, k: number): PackedWeight {
  const a = checkPack('packSequentialFma', w, n, k)
  const k8 = loadNativeKernels()
  if (a.format === 'bf16') k8.packStripsBf16(a.w as Uint16Array, a.n, a.k, a.out as Uint16Array)
  else k8.packStripsF32(a.w as Float32Array, a.n, a.k, a.out as Float32Array)
  return { format: a.format, n: a.n, k: a.k, data: a.out }
}

/**
 * y[m, n] = x[m, k] · W^T with W packed by packSequentialFma, native: the bits of matmulF32 /
 * matmulBf16 on W in the 'sequential-fma' order (the tiles read the strips where they lie instead
 * of packing W on every call).
 */
export function matmulPacked (x: Float32Array, m: number, k: number, packed: PackedWeight, out?: Float32Array, opts?: { roundBf16?: boolean }): Float32Array {
  const a = checkMatmulPacked('matmulPacked', x, m, k, packed, out, opts)
  const k8 = loadNativeKernels()
  return a.p.format === 'bf16'
    ? k8.matmulBf16(a.x, a.m, a.k, a.p.data as Uint16Array, a.p.n, a.out, a.roundBf16, PACKED_SEQUENTIAL_FMA_CODE)
    : k8.matmulF32(a.x, a.m, a.k, a.p.data as Float32Array, a.p.n, a.out, a.roundBf16, PACKED_SEQUENTIAL_FMA_CODE)
}

/** Reference of matmulPacked: W unpacked, then the sequential-fma reference. */
function matmulPackedReference (x: Float32Array, m: number, k: number, packed: PackedWeight, out?: Float32Array, opts?: { roundBf16?: boolean }): Float32Array {
  const a = checkMatmulPacked('reference.matmulPacked', x, m, k, packed, out, opts)
  const w = unpack(a.p)
  const o = { order: 'sequential-fma' as const, roundBf16: a.roundBf16 }
  return a.p.format === 'bf16'
    ? ref.matmulBf16(a.x, a.m, a.k, w as Uint16Array, a.p.n, a.out, o)
    : ref.matmulF32(a.x, a.m, a.k, w as Float32Array, a.p.n, a.out, o)
}

/**
 * RMSNorm of each of `rows` rows of length d (float32 weight of length d), native.
 * Bit-identical to reference.rmsNorm. Writes into `out` when given (not overlapping x or weight).
 */
export function rmsNorm (x: Float32Array, rows: number, d: number, weight: Float32Array, eps: number, out?: Float32Array): Float32Array {
  const a = checkRmsNorm('rmsNorm', x, rows, d, weight, eps, out)
  return loadNativeKernels().rmsNorm(a.x, a.rows, a.d, a.weight, a.eps, a.out)
}

/**
 * f(x[i]) for every element, f one of the fmath.ts functions by name, native (exp 8 lanes at a
 * time). Bit-identical to calling the TypeScript function per element; NaN written canonical.
 * `out` may be x itself.
 */
export function fmathArray (name: FmathName, x: Float32Array, out?: Float32Array): Float32Array {
  const a = checkFmathArray('fmathArray', name, x, out)
  return loadNativeKernels().fmathArray(FMATH_CODES[a.name], a.x, a.out)
}

/**
 * Multi-query attention with per-head sinks over one shared K = V table, native: q [T, H, D],
 * kv [N, D], query t attends to rows keyIndex[offsets[t] .. offsets[t+1]) in that order, sinks [H].
 * Returns out [T, H, D]. Bit-identical to reference.attentionMqa (docs/kernels.md, "Attention").
 */
export function attentionMqa (q: Float32Array, t: number, h: number, d: number, kv: Float32Array, n: number,
  offsets: Int32Array, keyIndex: Int32Array, sinks: Float32Array, scale: number, out?: Float32Array,
  opts?: AttentionOptions): Float32Array {
  const a = checkAttention('attentionMqa', q, t, h, d, kv, n, offsets, keyIndex, sinks, scale, out, opts)
  return loadNativeKernels().attentionMqa(a.q, a.t, a.h, a.d, a.kv, a.n, a.offsets, a.keyIndex, a.sinks, a.scale,
    attentionFlagBits(a.flags), a.out)
}

/**
 * Lightning-indexer scores, native: q [T, Hi, Di], entries [N, Di], weights [T, Hi]; entries
 * 0 .. visible[t]-1 are visible to query t, the rest score -Inf. Returns scores [T, N].
 * Bit-identical to reference.indexerScores (docs/kernels.md, "Indexer scores").
 */
export function indexerScores (q: Float32Array, t: number, h: number, d: number, entries: Float32Array, n: number,
  weights: Float32Array, visible: Int32Array, qScale: number, wScale: number, out?: Float32Array): Float32Array {
  const a = checkIndexer('indexerScores', q, t, h, d, entries, n, weights, visible, qScale, wScale, out)
  return loadNativeKernels().indexerScores(a.q, a.t, a.h, a.d, a.entries, a.n, a.weights, a.visible, a.qScale, a.wScale, a.out)
}

/**
 * The compressor's softmax pooling, native: kv and gate [W, rows, d] -> out [W, d], a softmax over
 * the rows for every channel. Bit-identical to reference.softmaxPool (docs/kernels.md, "Pooling").
 */
export function softmaxPool (kv: Float32Array, gate: Float32Array, w: number, rows: number, d: number,
  out?: Float32Array, opts?: PoolOptions): Float32Array {
  const a = checkPool('softmaxPool', kv, gate, w, rows, d, out, opts)
  return loadNativeKernels().softmaxPool(a.kv, a.gate, a.w, a.rows, a.d, poolFlagBits(a.flags), a.out)
}

/**
 * Interleaved RoPE over x [rows, heads, headDim] in place, native: the slice [offset, offset +
 * ropeDim) of every head, row r by table row opts.tableRows[r] (or opts.firstTableRow + r).
 * Bit-identical to src/model/rope.ts applyRopeInterleaved per (row, head), NaN made canonical.
 */
export function ropeRows (x: Float32Array, rows: number, heads: number, headDim: number, offset: number, ropeDim: number,
  cos: Float32Array, sin: Float32Array, opts?: RopeRowsOptions): Float32Array {
  const a = checkRopeRows('ropeRows', x, rows, heads, headDim, offset, ropeDim, cos, sin, opts)
  return loadNativeKernels().ropeRows(a.x, a.rows, a.heads, a.headDim, a.offset, a.ropeDim, a.cos, a.sin, a.tableRows, a.inverse)
}

/** The Math.fround references: same signatures, same bits, no addon needed. */
export const reference = {
  matmulF32: ref.matmulF32,
  matmulBf16: ref.matmulBf16,
  matmulBf16Grouped: groupedRef.matmulBf16Grouped,
  moeExperts: moeExpertsRef.moeExperts,
  rmsNorm: ref.rmsNorm,
  fmathArray: fmathArrayRef.fmathArray,
  attentionMqa: attentionRef.attentionMqa,
  indexerScores: indexerRef.indexerScores,
  softmaxPool: poolRef.softmaxPool,
  ropeRows: ropeRef.ropeRows,
  roundBf16Array: ref.roundBf16InPlace,
  hcPost: hcPostRef.hcPost,
  hcCollapse: hcCollapseRef.hcCollapse,
  unweightedNormRows: unweightedNormRef.unweightedNormRows,
  topkRows: topkRowsRef.topkRows,
  mxRoundTrip: mxRoundTripRef.mxRoundTrip,
  decodeBf16Array: bf16ArraysRef.decodeBf16Array,
  exactBf16Codes: bf16ArraysRef.exactBf16Codes,
  packSequentialFma: packReference as (w: Float32Array | Uint16Array, n: number, k: number) => PackedWeight,
  matmulPacked: matmulPackedReference,
}

/** Maximum thread count accepted by setKernelThreads. */
export const MAX_KERNEL_THREADS = 1024

/**
 * How many threads later native calls may use (1..1024; default: the machine's core count).
 * Threads split output columns (matmul) or rows (RMSNorm), never a sum, so results do not change.
 * Calls smaller than kernelParallelThreshold() multiply-adds always run on the calling thread.
 */
/**
 * The hyper-connections' write-back, native: out [n, hc, hidden] = act(act(post_k * sub) +
 * act(sum_j comb[j][k] * h_j)) per token and stream, post and comb cast by act (bf16 RNE when
 * `bf16`). Bit-identical to reference.hcPost (src/kernels/hc-post.ts), NaN written canonical.
 */
export function hcPost (h: Float32Array, n: number, post: Float32Array, comb: Float32Array, sub: Float32Array,
  hc: number, hidden: number, bf16: boolean, out?: Float32Array): Float32Array {
  const a = checkHcPost('hcPost', h, n, post, comb, sub, hc, hidden, bf16, out)
  return loadNativeKernels().hcPost(a.h, a.n, a.post, a.comb, a.sub, a.hc, a.hidden, a.bf16, a.out)
}

/**
 * The hyper-connections' collapse, native: out [n, hidden] = act(sum_j pre_{t,j} * h_{t,j}) per
 * token, j ascending (bf16 RNE when `bf16`). Bit-identical to reference.hcCollapse
 * (src/kernels/hc-collapse.ts), NaN written canonical.
 */
export function hcCollapse (h: Float32Array, n: number, pre: Float32Array, hc: number, hidden: number, bf16: boolean,
  out?: Float32Array): Float32Array {
  const a = checkHcCollapse('hcCollapse', h, n, pre, hc, hidden, bf16, out)
  return loadNativeKernels().hcCollapse(a.h, a.n, a.pre, a.hc, a.hidden, a.bf16, a.out)
}

/**
 * DeepseekV4UnweightedRMSNorm of each row of x [rows, d] in place, native: x = act(x * act(1 /
 * sqrt(mean(x^2) + eps))), the sum in the lanes8 order. Bit-identical to
 * reference.unweightedNormRows (src/kernels/unweighted-norm.ts), NaN written canonical.
 */
export function unweightedNormRows (x: Float32Array, rows: number, d: number, eps: number, bf16: boolean): Float32Array {
  const a = checkUnweightedNorm('unweightedNormRows', x, rows, d, eps, bf16)
  return loadNativeKernels().unweightedNormRows(a.x, a.rows, a.d, a.eps, a.bf16)
}

/**
 * The min(k, lengths[r]) best entries of each row r of scores [rows, stride] (its first lengths[r]),
 * ascending index, native: topkIndices(row, k, { order: 'index' }) per row, threads over rows.
 * The same picks as reference.topkRows (src/kernels/topk-rows.ts); read a row with topkRow.
 */
export function topkRows (scores: Float32Array, rows: number, stride: number, lengths: Int32Array, k: number): TopkRows {
  const a = checkTopkRows('topkRows', scores, rows, stride, lengths, k)
  const indices = new Int32Array(a.rows * a.k)
  const counts = new Int32Array(a.rows)
  loadNativeKernels().topkRows(a.scores, a.rows, a.stride, a.lengths, a.k, indices, counts)
  return { indices, counts, k: a.k }
}

/**
 * The values quantise -> dequantise leaves of x in consecutive blocks of `block` values, native:
 * one ue8m0 scale per block, elements 'e4m3' (saturating at 448) or 'e2m1' (block even), ties to
 * even; a block holding NaN or ±Inf comes back all 0x7fc00000. Bit-identical to
 * reference.mxRoundTrip, the composition of src/numerics' quantize and dequantize. `out` may be x.
 */
export function mxRoundTrip (x: Float32Array, block: number, element: MxElement, out?: Float32Array): Float32Array {
  const a = checkMxRoundTrip('mxRoundTrip', x, block, element, out)
  return loadNativeKernels().mxRoundTrip(a.x, a.block, MX_ELEMENT_CODES[a.element], a.out)
}

/** bf16 codes widened to float32 (exact), native: reference.decodeBf16Array, src/numerics decodeBf16. */
export function decodeBf16Array (codes: Uint16Array, out?: Float32Array): Float32Array {
  const a = checkDecodeBf16Array('decodeBf16Array', codes, out)
  return loadNativeKernels().decodeBf16Array(a.codes, a.out)
}

/**
 * The bf16 codes of `values` (written into `out` when given) when every value is exactly a bf16
 * value, else null, native: reference.exactBf16Codes. An exact value's code is its top 16 bits;
 * a NaN with low bits set becomes the quiet bf16 NaN of its sign. After null, out holds no result.
 */
export function exactBf16Codes (values: Float32Array, out?: Uint16Array): Uint16Array | null {
  const a = checkExactBf16Codes('exactBf16Codes', values, out)
  return loadNativeKernels().exactBf16Codes(a.values, a.out) ? a.out : null
}

/** Below this many elements the TypeScript loop beats a native call and its threads. */
const NATIVE_ROUND_MIN = 8192

/**
 * a[from, to) rounded to bf16 in place (the engine's activation rounding points), native for long
 * ranges: bit-identical to reference.roundBf16InPlace. Returns a.
 */
export function roundBf16Array (a: Float32Array, from = 0, to = a.length): Float32Array {
  if (!(a instanceof Float32Array)) throw new NumericsError(`roundBf16Array: a must be a Float32Array, got ${Object.prototype.toString.call(a)}`)
  if (!Number.isSafeInteger(from) || !Number.isSafeInteger(to) || from < 0 || to > a.length || from > to) {
    throw new NumericsError(`roundBf16Array: [${String(from)}, ${String(to)}) is not a range of the array's ${a.length} elements`)
  }
  if (to - from < NATIVE_ROUND_MIN) return ref.roundBf16InPlace(a, from, to)
  loadNativeKernels().roundBf16Array(a.subarray(from, to))
  return a
}

export function setKernelThreads (n: number): void {
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > MAX_KERNEL_THREADS) {
    throw new NumericsError(`setKernelThreads: n must be an integer from 1 to ${MAX_KERNEL_THREADS}, got ${String(n)}`)
  }
  loadNativeKernels().setThreads(n)
}

/** The thread count native calls currently may use. */
export function getKernelThreads (): number {
  return loadNativeKernels().getThreads()
}

/** The work size (m * n * k multiply-adds, or rows * d elements) from which native calls use threads. */
export function kernelParallelThreshold (): number {
  return loadNativeKernels().minParallelWork
}

/**
 * This machine's AVX2 float32 peak for the kernels' instruction mix (separate mul and add, no FMA),
 * in GFLOP/s, measured on `threads` threads for about `millis` ms.
 */
export function measurePeakGflops (threads: number, millis = 200): number {
  return loadNativeKernels().measurePeakGflops(threads, millis)
}

/** Streaming copy bandwidth (bytes read + written) in GB/s over `bytes` bytes, `repeats` times. */
export function measureStreamGbps (threads: number, bytes = 256 << 20, repeats = 4): number {
  return loadNativeKernels().measureStreamGbps(threads, bytes, repeats)
}

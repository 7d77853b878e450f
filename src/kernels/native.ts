// Loading the pdb_kernels addon (native/), lazily, so the TypeScript references work without it.
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import { PdBridgeError } from '../errors.ts'

/** The ABI version this TypeScript expects from native/src/addon.cc; a mismatch means a stale build. */
export const EXPECTED_ABI_VERSION = 10

/** Where `npm run build:native` writes the addon. */
export const DEFAULT_ADDON_PATH = fileURLToPath(new URL('../../native/build/Release/pdb_kernels.node', import.meta.url))

/** The kernel variants the addon can be built with (docs/kernels.md, "Portable build and ISA dispatch"). */
export type KernelIsa = 'avx512' | 'avx2' | 'portable'

/** The addon's code for each accumulation order (native/src/matmul.h, MatmulOrder). */
export const MATMUL_ORDER_CODES = { lanes8: 0, blocks128: 1, 'lanes8-fma': 2, 'sequential-fma': 3 } as const

/** The addon's code for the sequential-fma order over W packed in strips (src/kernels/packed.ts). */
export const PACKED_SEQUENTIAL_FMA_CODE = 4

/** The raw functions the addon exports (arguments already validated by src/kernels/index.ts). */
export interface NativeKernels {
  abiVersion: number
  /** The variant this process runs: chosen at load (the widest the CPU runs) or by PD_KERNELS_ISA. */
  isa: KernelIsa
  /** The variants this build and CPU can run. */
  isas: KernelIsa[]
  minParallelWork: number
  /** Chunks run on persistent workers (PD_KERNEL_POOL); absent in builds before the pool. */
  threadPool?: boolean
  matmulF32 (x: Float32Array, m: number, k: number, w: Float32Array, n: number, out: Float32Array, roundBf16: boolean, order?: number): Float32Array
  matmulBf16 (x: Float32Array, m: number, k: number, w: Uint16Array, n: number, out: Float32Array, roundBf16: boolean, order?: number): Float32Array
  moeExperts (x: Float32Array, n: number, hidden: number, inter: number, gateUps: Uint16Array[], downs: Uint16Array[], picks: Int32Array,
    weights: Float32Array, topk: number, limit: number, roundBf16: boolean, order: number, routed: Float32Array): Float32Array
  matmulBf16Grouped (xs: Float32Array[], ms: number[], k: number, ws: Uint16Array[], n: number, outs: Float32Array[], roundBf16: boolean, order: number): Float32Array[]
  /** W [n, k] into strips of 16 rows (out: ceil(n / 16) * 16 * k codes). */
  packStripsF32 (w: Float32Array, n: number, k: number, out: Float32Array): Float32Array
  packStripsBf16 (w: Uint16Array, n: number, k: number, out: Uint16Array): Uint16Array
  rmsNorm (x: Float32Array, rows: number, d: number, weight: Float32Array, eps: number, out: Float32Array): Float32Array
  /** code: FMATH_CODES[name] (src/kernels/fmath.ts). */
  fmathArray (code: number, x: Float32Array, out: Float32Array): Float32Array
  /** flags: 1 bf16 scores, 2 bf16 probabilities, 4 bf16 output. */
  attentionMqa (q: Float32Array, t: number, h: number, d: number, kv: Float32Array, n: number, offsets: Int32Array,
    keyIndex: Int32Array, sinks: Float32Array, scale: number, flags: number, out: Float32Array): Float32Array
  indexerScores (q: Float32Array, t: number, h: number, d: number, entries: Float32Array, n: number, weights: Float32Array,
    visible: Int32Array, qScale: number, wScale: number, out: Float32Array): Float32Array
  /** flags: 1 bf16 weights, 2 bf16 products, 4 bf16 output. */
  softmaxPool (kv: Float32Array, gate: Float32Array, w: number, rows: number, d: number, flags: number, out: Float32Array): Float32Array
  ropeRows (x: Float32Array, rows: number, heads: number, headDim: number, offset: number, ropeDim: number,
    cos: Float32Array, sin: Float32Array, tableRows: Int32Array, inverse: boolean): Float32Array
  /** Every element rounded to bf16 in place (src/kernels/reference.ts roundBf16InPlace). */
  roundBf16Array (x: Float32Array): Float32Array
  /** The hyper-connections' write-back (src/kernels/hc-post.ts is its reference). */
  hcPost (h: Float32Array, n: number, post: Float32Array, comb: Float32Array, sub: Float32Array, hc: number, hidden: number, bf16: boolean, out: Float32Array): Float32Array
  /** The hyper-connections' collapse (src/kernels/hc-collapse.ts is its reference). */
  hcCollapse (h: Float32Array, n: number, pre: Float32Array, hc: number, hidden: number, bf16: boolean, out: Float32Array): Float32Array
  /** Per-row unweighted RMSNorm in place (src/kernels/unweighted-norm.ts is its reference). */
  unweightedNormRows (x: Float32Array, rows: number, d: number, eps: number, bf16: boolean): Float32Array
  /** Top-k per row (src/kernels/topk-rows.ts is its reference); returns indices. */
  topkRows (scores: Float32Array, rows: number, stride: number, lengths: Int32Array, k: number, indices: Int32Array, counts: Int32Array): Int32Array
  /** Quantise -> dequantise per block (src/kernels/mx-round-trip.ts is its reference); element: MX_ELEMENT_CODES. */
  mxRoundTrip (x: Float32Array, block: number, element: number, out: Float32Array): Float32Array
  /** bf16 codes widened to float32 (src/kernels/bf16-arrays.ts is its reference). */
  decodeBf16Array (codes: Uint16Array, out: Float32Array): Float32Array
  /** true with out filled when every value is exactly bf16, else false (src/kernels/bf16-arrays.ts). */
  exactBf16Codes (values: Float32Array, out: Uint16Array): boolean
  /** true: the lanes8 orders at m >= 8 run the earlier kernels (the same bits); benchmarks only. */
  setLegacyMatmul?: (on: boolean) => void
  /** false: the lanes8 orders in the decode tile's range (4..16 rows; 6..16 in avx2, portable) run the kernels before it (the same bits); benchmarks only. */
  setDecodeTile?: (on: boolean) => void
  /** Benchmarks only: off, the decode tile never fuses the lanes8 steps of exact products (same bits). */
  setExactProductFma?: (on: boolean) => void
  setThreads (n: number): void
  getThreads (): number
  measurePeakGflops (threads: number, millis: number): number
  measureStreamGbps (threads: number, bytes: number, repeats: number): number
}

const require = createRequire(import.meta.url)
let loaded: NativeKernels | undefined

/**
 * The addon at `path` (default: the npm build output). Throws PdBridgeError naming the path and
 * the fix ("run npm run build:native") when it is missing, fails to load, or is a stale build.
 */
export function loadNativeKernels (path: string = DEFAULT_ADDON_PATH): NativeKernels {
  if (path === DEFAULT_ADDON_PATH && loaded) return loaded
  let addon: NativeKernels
  try {
    addon = require(path) as NativeKernels
  } catch (err) {
    const missing = (err as NodeJS.ErrnoException)?.code === 'MODULE_NOT_FOUND'
    const why = missing ? 'is not built' : `failed to load (${(err as Error)?.message ?? String(err)})`
    throw new PdBridgeError(`native kernels ${path} ${why}: run npm run build:native`, { cause: err })
  }
  if (addon.abiVersion !== EXPECTED_ABI_VERSION) {
    throw new PdBridgeError(
      `native kernels ${path} have ABI version ${String(addon.abiVersion)}, expected ${EXPECTED_ABI_VERSION} (stale build): run npm run build:native`)
  }
  if (path === DEFAULT_ADDON_PATH) {
    poolFromEnv()
    addon.setThreads(threadsFromEnv() ?? addon.getThreads())
    loaded = addon
  }
  return addon
}

/**
 * PD_KERNEL_THREADS: the kernels' thread count for this process (1..1024), e.g. a decoder held to 2
 * of a host's cores for a comparison. Unset: the machine's core count. Results never depend on it.
 */
export function threadsFromEnv (env: NodeJS.ProcessEnv = process.env): number | undefined {
  const text = env.PD_KERNEL_THREADS
  if (text === undefined || text === '') return undefined
  if (!/^\d{1,4}$/.test(text) || Number(text) < 1 || Number(text) > 1024) {
    throw new PdBridgeError(`PD_KERNEL_THREADS: ${JSON.stringify(text)} is not an integer from 1 to 1024`)
  }
  return Number(text)
}

/**
 * PD_KERNEL_POOL: `on` (chunks on persistent workers), `off` (threads started per call), or unset
 * (on where the machine has 4 or more hardware threads). The addon reads it when it loads; this
 * refuses any other value by name.
 */
export function poolFromEnv (env: NodeJS.ProcessEnv = process.env): 'on' | 'off' | undefined {
  const text = env.PD_KERNEL_POOL
  if (text === undefined || text === '') return undefined
  if (text !== 'on' && text !== 'off') throw new PdBridgeError(`PD_KERNEL_POOL: ${JSON.stringify(text)} is not on or off (or unset)`)
  return text
}

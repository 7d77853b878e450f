// What a llama.cpp DeepSeek-V4 sequence-state file holds (llama.cpp v0.5.0 as bundled by
// node-llama-cpp 3.22.1: llama-context.cpp state_seq_save_file, llama-kv-cache-dsv4.cpp
// state_write, llama-kv-cache.cpp state_write_meta/data). Little-endian, in this order:
//   sequence header   'ggsq', version 3, token count, token ids (i32)
//   DSV4 header       0x34565344 ('DSV4'), version 1, mode (0 full)
//   base cache        the ISWA cache's non-SWA half: DSV4 puts no layer there, only one cell
//                     record (pos, n_seq, seq ids) per token
//   window            the SWA half: the cells a next query can still see, then per layer the
//                     K rows of those cells (K only: V is the same tensor in DSV4)
//   K caches          CSA pool, HCA pool, indexer pool: per layer floor(T / ratio) rows
//   compressor rings  CSA, HCA, indexer: per layer the kv and score rings, always F32
// The section versions are checked on read: this layout is llama.cpp's internal format.

export const SEQ_MAGIC = 0x67677371 // 'ggsq'
export const SEQ_VERSION = 3
export const DSV4_MAGIC = 0x34565344 // 'DSV4'
export const DSV4_VERSION = 1
export const DSV4_MODE_FULL = 0
export const K_CACHE_VERSION = 2
export const RING_VERSION = 1

/** ggml type ids a state may hold here. */
export const GGML_F32 = 0
export const GGML_F16 = 1
export type CacheType = 'F32' | 'F16'
export const ggmlTypeId = (t: CacheType): number => t === 'F32' ? GGML_F32 : GGML_F16
export const ggmlTypeSize = (t: CacheType): number => t === 'F32' ? 4 : 2

/** One cell record of a KV cache stream. */
export interface CellRecord {
  pos: number
  seqIds: number[]
}

/** A K-cache stream of the ISWA cache (base or window): its cells and, per layer, one row per cell. */
export interface CellStream {
  cells: CellRecord[]
  /** The context's V-transposed flag (no flash attention: 1); DSV4 writes no V rows either way. */
  vTrans: number
  /** Per layer, in cache order (no layer id is written): ggml type, row size, rows [cells, rowSize]. */
  layers: { type: number, rowSize: number, data: Uint8Array }[]
}

/** The base or window section: one entry per stream (null: an empty stream). */
export interface IswaHalf {
  streams: (CellStream | null)[]
}

/** A tensor as the DSV4 sections write it: type, width (ne0), rows, row size, then the rows. */
export interface StateTensor {
  type: number
  width: number
  rows: number
  rowSize: number
  /** [streams * rows * rowSize] bytes. */
  data: Uint8Array
}

/** A compressed K cache (CSA, HCA or indexer pool). */
export interface KCacheSection {
  version: number
  rows: number
  streams: number
  layers: { il: number, k: StateTensor }[]
}

/** A compressor-ring section (CSA, HCA or indexer). */
export interface RingSection {
  version: number
  ratio: number
  stateSize: number
  width: number
  streams: number
  layers: { il: number, kv: StateTensor, score: StateTensor }[]
}

/** A whole sequence-state file, section by section. */
export interface LlamaCppState {
  tokens: Int32Array
  dsv4: { version: number, mode: number }
  base: IswaHalf
  window: IswaHalf
  kCaches: { csa: KCacheSection, hca: KCacheSection, lid: KCacheSection }
  rings: { csa: RingSection, hca: RingSection, lid: RingSection }
}

export const POOLS = ['csa', 'hca', 'lid'] as const
export type Pool = typeof POOLS[number]

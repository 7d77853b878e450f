// Parse a sequence-state file section by section, checking only what the layout itself fixes
// (magics, versions, mode, sizes that must agree with each other). Whether the state fits a
// model and a context is guard.ts's question.
import { ByteReader } from './bytes.ts'
import {
  DSV4_MAGIC, DSV4_MODE_FULL, DSV4_VERSION, K_CACHE_VERSION, POOLS, RING_VERSION, SEQ_MAGIC, SEQ_VERSION,
  type CellRecord, type CellStream, type IswaHalf, type KCacheSection, type LlamaCppState, type RingSection, type StateTensor,
} from './format.ts'

const hex = (v: number) => `0x${v.toString(16).padStart(8, '0')}`

// One ISWA half (llama_kv_cache::state_write): stream count, then per stream a cell count and,
// when non-zero, the cell records and the K rows of every layer.
function readIswaHalf (r: ByteReader): IswaHalf {
  const nStream = r.u32()
  if (nStream < 1 || nStream > 256) r.fail(`stream count ${nStream} (a context has 1 to 256)`)
  const streams: (CellStream | null)[] = []
  for (let s = 0; s < nStream; s++) {
    const count = r.u32()
    if (count === 0) {
      streams.push(null)
      continue
    }
    if (count * 12 > r.remaining) r.fail(`stream ${s} claims ${count} cells, more than the file holds`)
    const cells: CellRecord[] = []
    for (let i = 0; i < count; i++) {
      const pos = r.i32()
      const nSeq = r.u32()
      if (nSeq > 256) r.fail(`cell ${i} of stream ${s} claims ${nSeq} sequences`)
      const seqIds: number[] = []
      for (let j = 0; j < nSeq; j++) seqIds.push(r.i32())
      cells.push({ pos, seqIds })
    }
    const vTrans = r.u32()
    const nLayer = r.u32()
    if (nLayer > 1000) r.fail(`stream ${s} claims ${nLayer} layers`)
    const layers: CellStream['layers'] = []
    for (let l = 0; l < nLayer; l++) {
      const type = r.i32()
      const rowSize = r.u64()
      if (rowSize * count > r.remaining) r.fail(`layer ${l} of stream ${s}: ${count} rows of ${rowSize} bytes run past the end of the file`)
      layers.push({ type, rowSize, data: r.bytes(rowSize * count) })
    }
    streams.push({ cells, vTrans, layers })
  }
  return { streams }
}

// dsv4_state_write_tensor_streams: type, ne0, rows, row size, then `streams` blocks of rows.
function readTensor (r: ByteReader, streams: number, what: string): StateTensor {
  const type = r.i32()
  const width = r.u64()
  const rows = r.u64()
  const rowSize = r.u64()
  const size = rows * rowSize * streams
  if (size > r.remaining) r.fail(`${what}: ${rows} rows of ${rowSize} bytes run past the end of the file`)
  return { type, width, rows, rowSize, data: r.bytes(size) }
}

function readKCache (r: ByteReader): KCacheSection {
  const version = r.u32()
  if (version !== K_CACHE_VERSION) r.fail(`section version ${version}, this reader knows ${K_CACHE_VERSION} (llama.cpp of node-llama-cpp 3.22.1)`)
  const rows = r.u32()
  const streams = r.u32()
  const nLayer = r.u32()
  if (nLayer > 1000) r.fail(`claims ${nLayer} layers`)
  const layers: KCacheSection['layers'] = []
  for (let l = 0; l < nLayer; l++) {
    const il = r.u32()
    const k = readTensor(r, streams, `layer ${il}`)
    if (k.rows !== rows) r.fail(`layer ${il} holds ${k.rows} rows, the section header says ${rows}`)
    layers.push({ il, k })
  }
  return { version, rows, streams, layers }
}

function readRing (r: ByteReader): RingSection {
  const version = r.u32()
  if (version !== RING_VERSION) r.fail(`section version ${version}, this reader knows ${RING_VERSION} (llama.cpp of node-llama-cpp 3.22.1)`)
  const ratio = r.u32()
  const stateSize = r.u32()
  const width = r.u32()
  const streams = r.u32()
  const nLayer = r.u32()
  if (nLayer > 1000) r.fail(`claims ${nLayer} layers`)
  const layers: RingSection['layers'] = []
  for (let l = 0; l < nLayer; l++) {
    const il = r.u32()
    const kv = readTensor(r, streams, `layer ${il} kv`)
    const score = readTensor(r, streams, `layer ${il} score`)
    for (const [name, t] of [['kv', kv], ['score', score]] as const) {
      if (t.rows !== stateSize || t.width !== width) r.fail(`layer ${il} ${name} is ${t.rows} x ${t.width}, the section header says ${stateSize} x ${width}`)
    }
    layers.push({ il, kv, score })
  }
  return { version, ratio, stateSize, width, streams, layers }
}

/** Parse the bytes of a sequence-state file; `file` names errors. */
export function parseLlamaCppState (bytes: Uint8Array, file?: string): LlamaCppState {
  const r = new ByteReader(bytes, file)
  const magic = r.u32()
  const version = r.u32()
  if (magic !== SEQ_MAGIC) r.fail(`magic ${hex(magic)}, a sequence state starts with ${hex(SEQ_MAGIC)} ('ggsq')`)
  if (version !== SEQ_VERSION) r.fail(`version ${version}, this reader knows ${SEQ_VERSION}`)
  const nTokens = r.u32()
  if (nTokens * 4 > r.remaining) r.fail(`claims ${nTokens} tokens, more than the file holds`)
  const tokens = new Int32Array(nTokens)
  for (let i = 0; i < nTokens; i++) tokens[i] = r.i32()

  r.section = 'DSV4 header'
  const dsMagic = r.u32()
  if (dsMagic !== DSV4_MAGIC) r.fail(`magic ${hex(dsMagic)}, expected ${hex(DSV4_MAGIC)} ('DSV4'): not a DeepSeek-V4 state`)
  const dsVersion = r.u32()
  if (dsVersion !== DSV4_VERSION) r.fail(`version ${dsVersion}, this reader knows ${DSV4_VERSION}`)
  const mode = r.u32()
  if (mode !== DSV4_MODE_FULL) r.fail(`mode ${mode}; only full states (mode ${DSV4_MODE_FULL}) are read here`)

  r.section = 'base cache'
  const base = readIswaHalf(r)
  r.section = 'window'
  const window = readIswaHalf(r)
  const kCaches = {} as LlamaCppState['kCaches']
  for (const p of POOLS) {
    r.section = `${p} K cache`
    kCaches[p] = readKCache(r)
  }
  const rings = {} as LlamaCppState['rings']
  for (const p of POOLS) {
    r.section = `${p} compressor ring`
    rings[p] = readRing(r)
  }
  r.section = 'end of file'
  if (r.remaining !== 0) r.fail(`${r.remaining} bytes follow the last section`)
  return { tokens, dsv4: { version: dsVersion, mode }, base, window, kCaches, rings }
}

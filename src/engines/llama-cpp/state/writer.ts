// Serialise a LlamaCppState in llama.cpp's byte order: the inverse of reader.ts.
import { ByteWriter } from './bytes.ts'
import { DSV4_MAGIC, POOLS, SEQ_MAGIC, SEQ_VERSION, type IswaHalf, type LlamaCppState, type StateTensor } from './format.ts'

function writeIswaHalf (w: ByteWriter, half: IswaHalf): void {
  w.u32(half.streams.length)
  for (const s of half.streams) {
    if (s === null) {
      w.u32(0)
      continue
    }
    w.u32(s.cells.length)
    for (const c of s.cells) {
      w.i32(c.pos)
      w.u32(c.seqIds.length)
      for (const id of c.seqIds) w.i32(id)
    }
    w.u32(s.vTrans)
    w.u32(s.layers.length)
    for (const l of s.layers) {
      w.i32(l.type)
      w.u64(l.rowSize)
      w.bytes(l.data)
    }
  }
}

function writeTensor (w: ByteWriter, t: StateTensor): void {
  w.i32(t.type)
  w.u64(t.width)
  w.u64(t.rows)
  w.u64(t.rowSize)
  w.bytes(t.data)
}

/** The file's bytes. */
export function serializeLlamaCppState (s: LlamaCppState): Uint8Array {
  const w = new ByteWriter()
  w.u32(SEQ_MAGIC)
  w.u32(SEQ_VERSION)
  w.u32(s.tokens.length)
  for (const t of s.tokens) w.i32(t)
  w.u32(DSV4_MAGIC)
  w.u32(s.dsv4.version)
  w.u32(s.dsv4.mode)
  writeIswaHalf(w, s.base)
  writeIswaHalf(w, s.window)
  for (const p of POOLS) {
    const k = s.kCaches[p]
    w.u32(k.version)
    w.u32(k.rows)
    w.u32(k.streams)
    w.u32(k.layers.length)
    for (const l of k.layers) {
      w.u32(l.il)
      writeTensor(w, l.k)
    }
  }
  for (const p of POOLS) {
    const r = s.rings[p]
    w.u32(r.version)
    w.u32(r.ratio)
    w.u32(r.stateSize)
    w.u32(r.width)
    w.u32(r.streams)
    w.u32(r.layers.length)
    for (const l of r.layers) {
      w.u32(l.il)
      writeTensor(w, l.kv)
      writeTensor(w, l.score)
    }
  }
  return w.finish()
}

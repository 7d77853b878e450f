// Check a parsed state against the model and context it is about to be loaded into, before
// llama.cpp reads a byte of it: llama.cpp checks some of this itself (and reports every failure as
// one generic node-llama-cpp error), some not at all (a token id past the vocabulary, a cell count
// that does not match the tokens). Each refusal names the section and what differs.
import { LlamaCppStateError } from './errors.ts'
import { GGML_F32, POOLS, ggmlTypeId, ggmlTypeSize, type IswaHalf, type LlamaCppState, type StateTensor } from './format.ts'
import { poolLayers, poolRatio, poolWidth, ringSize, ringWidth, type LlamaCppStateGeometry } from './geometry.ts'
import { windowPositions } from './liveness.ts'

const list = (xs: readonly number[]) => `[${xs.join(', ')}]`

function checkHalf (half: IswaHalf, section: string, g: LlamaCppStateGeometry, first: number, T: number, layers: number, file?: string): void {
  const fail = (problem: string): never => { throw new LlamaCppStateError(section, problem, file) }
  if (half.streams.length !== 1) fail(`${half.streams.length} streams; a context of one sequence has 1`)
  const s = half.streams[0]
  const want = T - first
  if (s === null) return want === 0 ? undefined : fail(`no cells, expected ${want} for ${T} tokens`)
  if (s.cells.length !== want) fail(`${s.cells.length} cells, expected ${want} for ${T} tokens`)
  const seen = new Set<number>()
  for (const c of s.cells) {
    if (c.seqIds.length !== 1 || c.seqIds[0] !== 0) fail(`the cell at position ${c.pos} belongs to sequences ${list(c.seqIds)}, expected [0]`)
    if (c.pos < first || c.pos >= T || seen.has(c.pos)) fail(`a cell at position ${c.pos}: expected each of positions ${first}..${T - 1} once`)
    seen.add(c.pos)
  }
  if (s.vTrans !== g.vTrans) fail(`V-transposed flag ${s.vTrans}, the context has ${g.vTrans} (flash attention ${g.vTrans === 1 ? 'off' : 'on'})`)
  if (s.layers.length !== layers) fail(`${s.layers.length} layers, the model has ${layers} here`)
  s.layers.forEach((l, i) => {
    if (l.type !== ggmlTypeId(g.cacheType)) fail(`layer ${i} is of ggml type ${l.type}, the context's K cache is ${g.cacheType} (${ggmlTypeId(g.cacheType)})`)
    if (l.rowSize !== g.headDim * ggmlTypeSize(g.cacheType)) fail(`layer ${i} rows are ${l.rowSize} bytes, expected head dim ${g.headDim} x ${ggmlTypeSize(g.cacheType)}`)
  })
}

function checkTensor (t: StateTensor, what: string, type: number, typeSize: number, width: number, rows: number, fail: (p: string) => never): void {
  if (t.type !== type) fail(`${what} is of ggml type ${t.type}, expected ${type}`)
  if (t.width !== width) fail(`${what} rows are ${t.width} wide, expected ${width}`)
  if (t.rows !== rows) fail(`${what} holds ${t.rows} rows, expected ${rows}`)
  if (t.rowSize !== width * typeSize) fail(`${what} rows are ${t.rowSize} bytes, expected ${width * typeSize}`)
}

/** Throw a LlamaCppStateError unless `s` is a full single-sequence state of geometry `g`. */
export function checkLlamaCppState (s: LlamaCppState, g: LlamaCppStateGeometry, file?: string): void {
  const T = s.tokens.length
  if (T < 1) throw new LlamaCppStateError('sequence header', 'no tokens', file)
  for (const t of s.tokens) {
    if (t < 0 || t >= g.vocabSize) throw new LlamaCppStateError('sequence header', `token id ${t} is outside the model's vocabulary [0, ${g.vocabSize}): a state of another model`, file)
  }
  checkHalf(s.base, 'base cache', g, 0, T, 0, file)
  checkHalf(s.window, 'window', g, windowPositions(T, g.slidingWindow).first, T, g.layerRatios.length, file)
  for (const p of POOLS) {
    const fail = (problem: string): never => { throw new LlamaCppStateError(`${p} K cache`, problem, file) }
    const k = s.kCaches[p]
    const rows = Math.floor(T / poolRatio(p))
    const ids = poolLayers(g, p)
    if (k.streams !== 1) fail(`${k.streams} streams, expected 1`)
    if (k.rows !== rows) fail(`${k.rows} rows, expected floor(${T} / ${poolRatio(p)}) = ${rows}`)
    if (k.layers.length !== ids.length || k.layers.some((l, i) => l.il !== ids[i])) fail(`layers ${list(k.layers.map((l) => l.il))}, the model has ${list(ids)}`)
    for (const l of k.layers) checkTensor(l.k, `layer ${l.il}`, ggmlTypeId(g.cacheType), ggmlTypeSize(g.cacheType), poolWidth(g, p), rows, fail)
  }
  for (const p of POOLS) {
    const fail = (problem: string): never => { throw new LlamaCppStateError(`${p} compressor ring`, problem, file) }
    const r = s.rings[p]
    const ids = poolLayers(g, p)
    if (r.streams !== 1) fail(`${r.streams} streams, expected 1`)
    if (r.ratio !== poolRatio(p) || r.stateSize !== ringSize(p) || r.width !== ringWidth(g, p)) {
      fail(`ratio ${r.ratio}, ${r.stateSize} rows of ${r.width}; the model has ratio ${poolRatio(p)}, ${ringSize(p)} rows of ${ringWidth(g, p)}`)
    }
    if (r.layers.length !== ids.length || r.layers.some((l, i) => l.il !== ids[i])) fail(`layers ${list(r.layers.map((l) => l.il))}, the model has ${list(ids)}`)
    for (const l of r.layers) {
      checkTensor(l.kv, `layer ${l.il} kv`, GGML_F32, 4, r.width, r.stateSize, fail)
      checkTensor(l.score, `layer ${l.il} score`, GGML_F32, 4, r.width, r.stateSize, fail)
    }
  }
}

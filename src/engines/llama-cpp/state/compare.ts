// Two states of the same geometry, section by section: which values are bit-identical, and how
// far the others are in units in the last place (ulps of the stored type, F32 or F16). Window
// cells are matched by position (the order of cells is llama.cpp's slot allocation, not data).
// Values no later step reads (liveness.ts) are left out and counted, never compared.
import { f16ToF32 } from './half.ts'
import { GGML_F16, POOLS, type LlamaCppState, type Pool, type StateTensor } from './format.ts'
import type { LlamaCppStateGeometry } from './geometry.ts'
import { ringRow, windowPositions } from './liveness.ts'

/** Histogram bucket upper bounds, in ulps (the last bucket is everything above 256). */
export const ULP_BUCKETS = [0, 1, 2, 4, 16, 256] as const

export interface SectionDistance {
  section: string
  /** Values compared, and how many are bit-identical. */
  values: number
  identical: number
  /** Counts per ULP_BUCKETS bucket (<= 0, <= 1, <= 2, <= 4, <= 16, <= 256), then > 256. */
  histogram: number[]
  maxUlp: number
  /** Largest |a - b| over the compared values. */
  maxAbs: number
  /** Values left out: held by llama.cpp but never read again (not carried by our cache), or no position written yet. */
  excluded: number
}

// An order-preserving integer key of a float's bits: the ulp distance is the difference of keys.
const key32 = (b: number) => b < 0 ? -(b & 0x7fffffff) : b
const key16 = (h: number) => (h & 0x8000) !== 0 ? -(h & 0x7fff) : h

class Tally {
  d: SectionDistance
  constructor (section: string) {
    this.d = { section, values: 0, identical: 0, histogram: new Array(ULP_BUCKETS.length + 1).fill(0), maxUlp: 0, maxAbs: 0, excluded: 0 }
  }

  /** Compare values [from, to) of two rows stored as `type`. */
  add (a: Uint8Array, b: Uint8Array, type: number, from: number, to: number): void {
    const d = this.d
    const f16 = type === GGML_F16
    const va = f16 ? new Uint16Array(a.buffer, a.byteOffset, a.byteLength / 2) : new Int32Array(a.buffer.slice(a.byteOffset, a.byteOffset + a.byteLength))
    const vb = f16 ? new Uint16Array(b.buffer, b.byteOffset, b.byteLength / 2) : new Int32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength))
    const fa = f16 ? null : new Float32Array(va.buffer)
    const fb = f16 ? null : new Float32Array(vb.buffer)
    for (let i = from; i < to; i++) {
      d.values++
      if (va[i] === vb[i]) {
        d.identical++
        d.histogram[0]++
        continue
      }
      const ulp = f16 ? Math.abs(key16(va[i]) - key16(vb[i])) : Math.abs(key32(va[i]) - key32(vb[i]))
      let bucket = ULP_BUCKETS.findIndex((u) => ulp <= u)
      if (bucket < 0) bucket = ULP_BUCKETS.length
      d.histogram[bucket]++
      d.maxUlp = Math.max(d.maxUlp, ulp)
      const diff = fa !== null && fb !== null ? Math.abs(fa[i] - fb[i]) : Math.abs(f16ToF32(va[i]) - f16ToF32(vb[i]))
      d.maxAbs = Math.max(d.maxAbs, diff)
    }
  }
}

const elementSize = (t: { type: number }) => t.type === GGML_F16 ? 2 : 4

/**
 * Section-by-section, layer-by-layer distances of `ours` from `theirs` (both of geometry `g`,
 * checked by guard.ts first): `window L0`, `csa K L1`, `csa ring kv L1`, ... in file order.
 */
export function compareStates (ours: LlamaCppState, theirs: LlamaCppState, g: LlamaCppStateGeometry): SectionDistance[] {
  const T = theirs.tokens.length
  const out: SectionDistance[] = []

  const sa = ours.window.streams[0]!
  const sb = theirs.window.streams[0]!
  const ia = new Map(sa.cells.map((c, i) => [c.pos, i]))
  const { firstVisible } = windowPositions(T, g.slidingWindow)
  sb.layers.forEach((lb, l) => {
    const t = new Tally(`window L${l}`)
    const la = sa.layers[l]
    sb.cells.forEach(({ pos }, j) => {
      if (pos < firstVisible) {
        t.d.excluded += g.headDim
        return
      }
      const i = ia.get(pos)!
      t.add(la.data.subarray(i * la.rowSize, (i + 1) * la.rowSize), lb.data.subarray(j * lb.rowSize, (j + 1) * lb.rowSize), lb.type, 0, g.headDim)
    })
    out.push(t.d)
  })

  for (const p of POOLS) {
    theirs.kCaches[p].layers.forEach((lb, l) => {
      const t = new Tally(`${p} K L${lb.il}`)
      t.add(ours.kCaches[p].layers[l].k.data, lb.k.data, lb.k.type, 0, lb.k.rows * lb.k.width)
      out.push(t.d)
    })
  }

  for (const p of POOLS) {
    theirs.rings[p].layers.forEach((lb, l) => {
      for (const which of ['kv', 'score'] as const) {
        const t = new Tally(`${p} ring ${which} L${lb.il}`)
        ringValues(t, p, T, ours.rings[p].layers[l][which], lb[which])
        out.push(t.d)
      }
    })
  }
  return out
}

// Live rows in full, the carry's first half; dead rows and rows no position reached yet left out.
function ringValues (t: Tally, pool: Pool, T: number, a: StateTensor, b: StateTensor): void {
  const w = b.width
  const rowBytes = w * elementSize(b)
  for (let row = 0; row < b.rows; row++) {
    const { role } = ringRow(pool, T, row)
    const ra = a.data.subarray(row * rowBytes, (row + 1) * rowBytes)
    const rb = b.data.subarray(row * rowBytes, (row + 1) * rowBytes)
    if (role === 'live') t.add(ra, rb, b.type, 0, w)
    else if (role === 'carry') {
      t.add(ra, rb, b.type, 0, w / 2)
      t.d.excluded += w / 2
    } else t.d.excluded += w
  }
}

/** Everything but the cache values: tokens, headers, cells (as sets of positions), layer lists, sizes. Empty when identical. */
export function structureDifferences (a: LlamaCppState, b: LlamaCppState): string[] {
  const diffs: string[] = []
  const same = (what: string, x: unknown, y: unknown) => {
    if (JSON.stringify(x) !== JSON.stringify(y)) diffs.push(`${what}: ${JSON.stringify(x)} vs ${JSON.stringify(y)}`.slice(0, 300))
  }
  same('tokens', Array.from(a.tokens), Array.from(b.tokens))
  same('DSV4 header', a.dsv4, b.dsv4)
  for (const [name, ha, hb] of [['base cache', a.base, b.base], ['window', a.window, b.window]] as const) {
    const shape = (h: typeof ha) => h.streams.map((s) => s === null ? null : {
      positions: s.cells.map((c) => c.pos).sort((x, y) => x - y),
      seqIds: [...new Set(s.cells.map((c) => c.seqIds.join(',')))],
      vTrans: s.vTrans,
      layers: s.layers.map((l) => [l.type, l.rowSize, l.data.length]),
    })
    same(name, shape(ha), shape(hb))
  }
  const meta = (t: StateTensor) => [t.type, t.width, t.rows, t.rowSize, t.data.length]
  for (const p of POOLS) {
    const k = (s: LlamaCppState) => ({ ...s.kCaches[p], layers: s.kCaches[p].layers.map((l) => [l.il, meta(l.k)]) })
    same(`${p} K cache`, k(a), k(b))
    const r = (s: LlamaCppState) => ({ ...s.rings[p], layers: s.rings[p].layers.map((l) => [l.il, meta(l.kv), meta(l.score)]) })
    same(`${p} compressor ring`, r(a), r(b))
  }
  return diffs
}

/** One printed line per section. */
export function sectionDistanceLine (d: SectionDistance): string {
  const pct = d.values === 0 ? '   -   ' : `${(100 * d.identical / d.values).toFixed(2).padStart(6)}%`
  const labels = ['0', '1', '2', '<=4', '<=16', '<=256', '>256']
  const hist = d.histogram.map((n, i) => `${labels[i]}:${n}`).join(' ')
  return `${d.section.padEnd(18)} ${String(d.values).padStart(7)} values  identical ${pct}  ulps ${hist}  max ${d.maxUlp} ulp (|d| ${d.maxAbs.toExponential(1)})  left out ${d.excluded}`
}

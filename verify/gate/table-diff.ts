// Effective rope tables compared bit for bit. A table is ropeTable(params, [0, extent)): its bits
// are a function of the inverse frequencies' bits, the attention factor and the extent only, so
// two places with equal inv_freq bits, attention factor and extent have identical tables at every
// position; otherwise the first differing (position, pair) is found by scanning rows, always on
// ropeTable's own output.
import { ropeInvFreq, ropeTable } from '../../src/model/rope.ts'
import type { RopeParams } from '../../src/model/config.ts'
import { f32ToBits } from '../../src/numerics/bits.ts'
import { fmt } from './finding.ts'

/** A table as a place implies it: parameters and the positions covered, [0, extent). */
export interface EffectiveTable {
  params: RopeParams
  extent: number
}

/** The first place two tables differ. */
export interface TableDifference {
  position: number
  pair: number
  /** What differs there, in words (bits of cos/sin, or a row or pair that only one table has). */
  what: string
}

function hex32 (x: number): string {
  return '0x' + f32ToBits(x).toString(16).padStart(8, '0')
}

/**
 * A string equal for two tables exactly when their bits are equal at every position: the inverse
 * frequencies' bits, the fp32 attention factor and the extent.
 */
export function tableIdentity (t: EffectiveTable): string {
  const inv = ropeInvFreq(t.params)
  const bits = Array.from(inv, (x) => f32ToBits(x).toString(16).padStart(8, '0')).join('')
  const scale = t.params.attentionFactor === 1 ? 'x1' : `x${hex32(Math.fround(t.params.attentionFactor))}`
  return `${inv.length}:${bits}:${scale}:${t.extent}`
}

// Where the row of position p differs, on ropeTable's output; null when the rows are identical.
function rowDifference (a: RopeParams, b: RopeParams, p: number): TableDifference | null {
  const ta = ropeTable(a, { start: p, count: 1 })
  const tb = ropeTable(b, { start: p, count: 1 })
  for (let k = 0; k < ta.cos.length; k++) {
    const [ca, cb, sa, sb] = [ta.cos[k], tb.cos[k], ta.sin[k], tb.sin[k]]
    if (!Object.is(ca, cb) && f32ToBits(ca) !== f32ToBits(cb)) return { position: p, pair: k, what: `cos bits ${hex32(ca)} vs ${hex32(cb)} (${ca} vs ${cb})` }
    if (!Object.is(sa, sb) && f32ToBits(sa) !== f32ToBits(sb)) return { position: p, pair: k, what: `sin bits ${hex32(sa)} vs ${hex32(sb)} (${sa} vs ${sb})` }
  }
  return null
}

/**
 * The first (position, pair), in row-major order, where the tables of `a` and `b` differ in bits,
 * or null when they are identical. A pair or position that only one table has counts as a
 * difference (`what` says which). `names` label the two sides in `what`.
 */
export function firstTableDifference (a: EffectiveTable, b: EffectiveTable, names: [string, string] = ['a', 'b']): TableDifference | null {
  const invA = ropeInvFreq(a.params)
  const invB = ropeInvFreq(b.params)
  const common = Math.min(a.extent, b.extent)
  if (invA.length !== invB.length) {
    const more = invA.length > invB.length ? names[0] : names[1]
    return { position: 0, pair: Math.min(invA.length, invB.length), what: `pair ${Math.min(invA.length, invB.length)} is in ${more}'s table only (${invA.length} vs ${invB.length} pairs)` }
  }
  const sameScale = Object.is(Math.fround(a.params.attentionFactor), Math.fround(b.params.attentionFactor)) && (a.params.attentionFactor === 1) === (b.params.attentionFactor === 1)
  const sameInv = invA.every((x, k) => f32ToBits(x) === f32ToBits(invB[k]))
  if (!(sameScale && sameInv)) {
    // Rows differ only where some angle (or the scale) differs: test the cheap angles first.
    for (let p = 0; p < common; p++) {
      const pos = Math.fround(p)
      let candidate = !sameScale
      for (let k = 0; k < invA.length && !candidate; k++) candidate = Math.fround(pos * invA[k]) !== Math.fround(pos * invB[k])
      if (!candidate) continue
      const d = rowDifference(a.params, b.params, p)
      if (d !== null) return d
    }
  }
  if (a.extent !== b.extent) {
    const longer = a.extent > b.extent ? names[0] : names[1]
    return { position: common, pair: 0, what: `position ${fmt(common)} is in ${longer}'s table only (extent ${fmt(a.extent)} vs ${fmt(b.extent)})` }
  }
  return null
}

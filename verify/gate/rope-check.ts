// The window check proper: for every layer type, the effective table each place implies, grouped by
// bit identity. The largest group is the consensus (a tie goes to the group holding the decoder:
// the bridge exists to reproduce the decoder's cache). Every place outside it is named with the
// fields that put it there, the first (position, pair) that differs and the angle error by
// position. Places inside a group whose raw values differ get a note, not a failure: only the
// tables count.
import { LAYER_TYPES, type LayerType, type RopeParams } from '../../src/model/config.ts'
import { angleErrorAt, firstPositionExceeding, invPair, reportPositions, type AngleErrorPoint } from './angle-error.ts'
import { PLACE_NAMES, type FieldSource, type Place, type PlaceName, type PlaceRope, type RopeParamName } from './places.ts'
import { firstTableDifference, tableIdentity, type TableDifference } from './table-diff.ts'

/** The default angle-error threshold, radians (about 5.7 degrees). */
export const DEFAULT_ANGLE_THRESHOLD = 0.1

/** One parameter that differs between a place and the consensus. */
export interface FieldDifference {
  param: RopeParamName
  /** Where the outlier's value came from. */
  source: FieldSource
  value: number | string | null
  consensusValue: number | string | null
}

/** How an outlier's table is off, by position. */
export interface AngleReport {
  threshold: number
  /** The first position whose error passes the threshold (null: never within the common extent). */
  firstExceeding: AngleErrorPoint | null
  /** The error at report positions (powers of ten, the original window, the crossing, the end). */
  table: AngleErrorPoint[]
  /** Positions both tables cover. */
  extent: number
  /** The inverse frequencies of the outlier and of the consensus, for plots. */
  inv: [Float32Array, Float32Array]
}

/** A place whose table is not the consensus table. */
export interface Outlier {
  place: PlaceName
  file: string
  /** The consensus place it is compared with. */
  against: PlaceName
  fields: FieldDifference[]
  first: TableDifference
  /** Absent when the angles agree (only the attention factor or the extent differ). */
  angle?: AngleReport
}

/** The verdict for one layer type. */
export interface LayerTypeVerdict {
  layerType: LayerType
  /** Places grouped by identical tables, the consensus first. */
  groups: PlaceName[][]
  consensus: PlaceName[]
  outliers: Outlier[]
  /** Raw values that differ inside a group of identical tables: not errors. */
  notes: string[]
}

const PARAMS: readonly RopeParamName[] = ['ropeType', 'theta', 'factor', 'originalMaxPositionEmbeddings', 'betaFast', 'betaSlow', 'attentionFactor', 'ropeDim', 'extent']
const YARN_ONLY: ReadonlySet<RopeParamName> = new Set(['factor', 'originalMaxPositionEmbeddings', 'betaFast', 'betaSlow'])

function valueOf (r: PlaceRope, param: RopeParamName): number | string | null {
  return param === 'extent' ? r.extent : (r.params as unknown as Record<string, number | string | null>)[param]
}

/** The parameters (and extent) whose values differ between two places' tables. */
export function differingParams (a: PlaceRope, b: PlaceRope): RopeParamName[] {
  const yarn = a.params.ropeType === 'yarn' || b.params.ropeType === 'yarn'
  return PARAMS.filter((p) => (yarn || !YARN_ONLY.has(p)) && !Object.is(valueOf(a, p), valueOf(b, p)))
}

function angleReport (a: RopeParams, b: RopeParams, extent: number, threshold: number, originalMax: number | null): AngleReport | undefined {
  const inv = invPair(a, b)
  if (inv === null) return undefined
  if (inv[0].every((x, k) => Object.is(x, inv[1][k]))) return undefined
  const firstExceeding = firstPositionExceeding(inv[0], inv[1], threshold, extent)
  const marks = [originalMax ?? -1, firstExceeding?.position ?? -1]
  const table = reportPositions(extent, marks).map((p) => angleErrorAt(inv[0], inv[1], p))
  return { threshold, firstExceeding, table, extent, inv }
}

/** Split places into groups of identical tables; the consensus group first (size, then the decoder). */
export function groupPlaces (tables: ReadonlyMap<PlaceName, PlaceRope>): PlaceName[][] {
  const byKey = new Map<string, PlaceName[]>()
  for (const name of PLACE_NAMES) {
    const t = tables.get(name)
    if (t === undefined) continue
    const key = tableIdentity(t)
    byKey.set(key, [...(byKey.get(key) ?? []), name])
  }
  const rank = (g: PlaceName[]) => g.length * 2 + (g.includes('decoder') ? 1 : 0)
  return [...byKey.values()].sort((x, y) => rank(y) - rank(x))
}

/**
 * Compare the tables the given places imply for one layer type. `threshold` is the angle error
 * (radians) whose first crossing is reported.
 */
export function checkLayerType (layerType: LayerType, places: readonly Place[], threshold = DEFAULT_ANGLE_THRESHOLD): LayerTypeVerdict {
  const tables = new Map(places.map((p) => [p.name, p.rope[layerType]]))
  const files = new Map(places.map((p) => [p.name, p.file]))
  const groups = groupPlaces(tables)
  const consensus = groups[0] ?? []
  const reference = consensus.includes('decoder') ? 'decoder' : consensus[0]
  const outliers: Outlier[] = []
  const notes: string[] = []
  for (const group of groups) {
    const inConsensus = group === consensus
    for (const name of group) {
      const here = tables.get(name)!
      if (inConsensus || name === reference) {
        if (name === reference) continue
        // Same table, maybe other raw values: say so, do not fail.
        const there = tables.get(reference)!
        for (const param of differingParams(here, there)) {
          notes.push(`${name} ${here.sources[param].field} is ${String(valueOf(here, param))}, ${reference}'s is ${String(valueOf(there, param))}, but the ${layerType} tables are bit-identical: not an error`)
        }
        continue
      }
      const there = tables.get(reference)!
      const fields = differingParams(here, there).map((param) => ({ param, source: here.sources[param], value: valueOf(here, param), consensusValue: valueOf(there, param) }))
      const first = firstTableDifference(here, there, [name, reference])
      if (first === null) continue // cannot happen: the identities differ
      const extent = Math.min(here.extent, there.extent)
      const originalMax = there.params.originalMaxPositionEmbeddings ?? here.params.originalMaxPositionEmbeddings
      outliers.push({ place: name, file: files.get(name)!, against: reference, fields, first, angle: angleReport(here.params, there.params, extent, threshold, originalMax) })
    }
  }
  return { layerType, groups, consensus, outliers, notes }
}

/** checkLayerType for every layer type. */
export function checkRopeTables (places: readonly Place[], threshold = DEFAULT_ANGLE_THRESHOLD): LayerTypeVerdict[] {
  return LAYER_TYPES.map((t) => checkLayerType(t, places, threshold))
}

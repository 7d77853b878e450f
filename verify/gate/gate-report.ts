// The gate's findings as one value, apart from the code that makes it (gate.ts) and the code that
// renders it (report.ts), so neither imports the other.
import { fmt, type Finding } from './finding.ts'
import type { NativeCheckResult } from './native-check.ts'
import type { NeedleGeometry, NeedleJudgement } from './needle-check.ts'
import type { Place, PlaceName } from './places.ts'
import type { LayerTypeVerdict } from './rope-check.ts'
import type { StoreSurvey } from './store-check.ts'

/** Everything the gate found. */
export interface GateReport {
  places: Partial<Record<PlaceName, Place>>
  rope: LayerTypeVerdict[]
  findings: Finding[]
  native?: NativeCheckResult
  store?: StoreSurvey
  /** The needle runs judged (records and the live run). */
  needle: NeedleJudgement[]
  /** The geometry needle runs and ledger entries must carry (when the gate could compute it). */
  needleGeometry?: NeedleGeometry
  /** Plot file per outlier, keyed `${layerType}/${place}` (only with reportDir). */
  plots: Map<string, string>
  /** Files written (report.md, report.json, plots). */
  written: string[]
  /** report.md, when a report directory was given. */
  reportFile?: string
  threshold: number
  verdict: { pass: boolean, failures: number, warnings: number, skipped: number, line: string }
}

/** A rope value as reports show it: token counts with separators. */
export function showValue (v: number | string | null): string {
  return typeof v === 'number' ? fmt(v) : String(v)
}

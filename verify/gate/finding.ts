// One line of the gate's verdict: which check, whether it passed, and where to look.

/** pass and fail decide the verdict; warn is shown but never fails; skip says a check did not run. */
export type FindingStatus = 'pass' | 'fail' | 'warn' | 'skip'

/** What the gate found, with the file and field to fix when there is one. */
export interface Finding {
  /** The check: 'places', 'rope', 'structure', 'sidecar', 'limits', 'store', 'seeds', 'native', 'needle'. */
  check: string
  /** A short rule id inside the check (e.g. 'answer-budget'). */
  rule: string
  status: FindingStatus
  file?: string
  field?: string
  message: string
}

/** Thousands separators, as the seed README writes token counts (2,097,152). */
export function fmt (n: number): string {
  return Number.isInteger(n) ? n.toLocaleString('en-US') : String(n)
}

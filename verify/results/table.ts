// A report table as plain data, apart from the tables built from a summary (tables.ts), so a section
// that the summary itself uses (faults, load) can make one without a cycle.

/** A titled table of text cells. */
export interface Table {
  title: string
  headers: string[]
  rows: string[][]
}

/** What a missing number shows: a leg that was not run, or nothing to take a median of. */
export const NOT_RUN = '—'

/** A whole number with thousands separators (no locale: the same bytes everywhere). */
export function groupDigits (v: number): string {
  return String(Math.round(v)).replace(/\B(?=(\d{3})+(?!\d))/g, ',')
}

/** `1 run`, `2 runs`: a count and its noun. */
export function plural (n: number, one: string, many: string = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`
}

/** Milliseconds as seconds with 2 decimals, or NOT_RUN when there are none. */
export function seconds (ms: number | null | undefined): string {
  return ms === null || ms === undefined ? NOT_RUN : `${(ms / 1000).toFixed(2)} s`
}

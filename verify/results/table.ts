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

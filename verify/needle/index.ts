// The needle protocol (docs/NEEDLE-PROTOCOL.md): documents, the grid, scoring, one run with the
// seed ledger, run records and the depth x length table and heatmap.
export * from '../../src/model/checkpoint/needle/words.ts'
export * from './filler.ts'
export * from './measure.ts'
export * from './document.ts'
export * from './grid.ts'
export * from './score.ts'
export * from './geometry.ts'
export * from './stream.ts'
export * from './record.ts'
export * from './run.ts'
export * from './heatmap.ts'

// Cold-prompt benchmark results: the run record and the generator (docs/BENCHMARK-PROTOCOL.md).
export * from './record.ts'
export * from './summary.ts'
export * from './tables.ts'
export * from './charts.ts'
export * from './render.ts'
export * from './generate.ts'

// Benchmark results: the cold-prompt run record, the micro-benchmark record, the shared
// environment block and the generator (docs/BENCHMARK-PROTOCOL.md), which also reads the needle
// run records of verify/needle. The micro benchmarks' own setup (bench-setup.ts, peaks.ts) loads the
// model and the native kernels, so it is imported directly by the protocols, not from here.
export * from './record.ts'
export * from './environment.ts'
export * from './micro-record.ts'
export * from './micro-summary.ts'
export * from './summary.ts'
export * from './summary-tables.ts'
export * from './tables.ts'
export * from './micro-tables.ts'
export * from './needle-section.ts'
export * from './fault-record.ts'
export * from './faults-section.ts'
export * from './load-record.ts'
export * from './load-section.ts'
export * from './load-levels-record.ts'
export * from './load-levels-section.ts'
export * from './charts.ts'
export * from './render.ts'
export * from './generate.ts'

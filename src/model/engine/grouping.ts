// Whether the engine runs its groups of same-shaped projections as one native call (the MoE's routed
// experts in moeExperts, the attention's o_a groups in one matmulBf16Grouped) or as one matmul call
// each with TypeScript between, as before. The same bits either way; a switch for benchmarks only
// (protocols/batch-step.ts --compare-grouped), so one process can time both.
let on = true

export function groupedKernelsOn (): boolean {
  return on
}

/** For benchmarks only: off, every projection of a group is its own call again. */
export function setGroupedKernels (enabled: boolean): void {
  on = enabled
}

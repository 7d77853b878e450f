// Several Linears of one shape applied at once, each to its own rows (a MoE layer's experts): one
// matmulBf16Grouped call where every one is a plain bf16 matmul in one order (Linear.bf16Matmul),
// so the kernel threads are handed the work once instead of once per Linear; otherwise each apply.
// Every output is the same dot product either way, so the same bits.
import { matmulBf16Grouped } from '../../kernels/index.ts'
import type { Linear } from './types.ts'

let groupedOn = true

/** For benchmarks only (protocols/batch-step.ts --compare-grouped-experts): off, applyEach calls each apply. */
export function setGroupedMatmul (on: boolean): void {
  groupedOn = on
}

/** Linear i applied to inputs[i] (x [m, inFeatures]); returns the outputs [m, outFeatures], in order. */
export function applyEach (linears: readonly Linear[], inputs: ReadonlyArray<{ x: Float32Array, m: number }>): Float32Array[] {
  if (linears.length !== inputs.length) throw new Error(`applyEach: ${linears.length} Linears for ${inputs.length} inputs`)
  const first = linears[0]
  const groupable = groupedOn && first?.bf16Matmul !== undefined && linears.every((l) =>
    l.bf16Matmul !== undefined && l.bf16Matmul.order === first.bf16Matmul!.order &&
    l.inFeatures === first.inFeatures && l.outFeatures === first.outFeatures)
  if (!groupable) return linears.map((l, i) => l.apply(inputs[i].x, inputs[i].m))
  const groups = linears.map((l, i) => ({ x: inputs[i].x, m: inputs[i].m, w: l.bf16Matmul!.codes }))
  return matmulBf16Grouped(groups, first.inFeatures, first.outFeatures, { order: first.bf16Matmul!.order })
}

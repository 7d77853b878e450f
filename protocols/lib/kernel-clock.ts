// Time spent inside each native kernel while `work` runs: every entry point of the addon object the
// kernels call through (src/kernels/native.ts) is wrapped with a clock for the call, then restored.
// The wrappers read the clock around each call and change no argument or result.
import type { NativeKernels } from '../../src/kernels/native.ts'

/** Per kernel: milliseconds inside it and calls, over `work`'s wall time. */
export interface KernelClock {
  wallMs: number
  kernels: Record<string, { ms: number, calls: number, share: number }>
}

/** The name kept for what no kernel accounts for. */
export const OUTSIDE_KERNELS = 'TypeScript, GC and the rest'

export function clockKernels (addon: NativeKernels, work: () => void): KernelClock {
  const target = addon as unknown as Record<string, unknown>
  const spent = new Map<string, { ms: number, calls: number }>()
  const originals = new Map<string, unknown>()
  for (const [name, fn] of Object.entries(target)) {
    if (typeof fn !== 'function' || name === 'setThreads' || name === 'getThreads') continue
    originals.set(name, fn)
    target[name] = (...args: unknown[]) => {
      const t0 = performance.now()
      try {
        return (fn as (...a: unknown[]) => unknown)(...args)
      } finally {
        const s = spent.get(name) ?? { ms: 0, calls: 0 }
        s.ms += performance.now() - t0
        s.calls++
        spent.set(name, s)
      }
    }
  }
  const t0 = performance.now()
  try {
    work()
  } finally {
    for (const [name, fn] of originals) target[name] = fn
  }
  const wallMs = performance.now() - t0
  let inside = 0
  const kernels: KernelClock['kernels'] = {}
  for (const [name, s] of [...spent].sort((a, b) => b[1].ms - a[1].ms)) {
    kernels[name] = { ...s, share: s.ms / wallMs }
    inside += s.ms
  }
  kernels[OUTSIDE_KERNELS] = { ms: wallMs - inside, calls: 0, share: (wallMs - inside) / wallMs }
  return { wallMs, kernels }
}

/**
 * One weight shape's bf16 matmuls: k x n (W's in and out features), per `work`. `calls` counts
 * matmuls (a grouped call's groups with rows each count one), `entryCalls` the addon calls that ran
 * them (fewer where matmulBf16Grouped ran several at once).
 */
export interface MatmulShape { shape: string, calls: number, entryCalls: number, meanRows: number, ms: number, weightMiB: number }

/**
 * The bf16 matmul's time per weight shape while `work` runs (matmulBf16 and matmulBf16Grouped
 * wrapped as clockKernels wraps every kernel): which projections grow with the batch, and by how
 * much per call, where clockKernels gives only the kernel's total. Sorted by time.
 */
export function clockMatmulShapes (addon: NativeKernels, work: () => void): MatmulShape[] {
  const target = addon as unknown as Record<string, unknown>
  const byShape = new Map<string, { calls: number, entryCalls: number, rows: number, ms: number, bytes: number }>()
  const originals = new Map<string, unknown>()
  /** Wrap entry `name`, whose arguments give the k x n shape and the rows of each matmul it runs. */
  const wrap = (name: 'matmulBf16' | 'matmulBf16Grouped', shapeOf: (args: unknown[]) => { k: number, n: number, rows: number[] }): void => {
    const fn = target[name] as (...a: unknown[]) => unknown
    originals.set(name, fn)
    target[name] = (...args: unknown[]) => {
      const t0 = performance.now()
      try {
        return fn(...args)
      } finally {
        const { k, n, rows } = shapeOf(args)
        const ran = rows.filter((m) => m > 0)
        const key = `${k}x${n}`
        const s = byShape.get(key) ?? { calls: 0, entryCalls: 0, rows: 0, ms: 0, bytes: 0 }
        s.ms += performance.now() - t0
        s.entryCalls++
        s.calls += name === 'matmulBf16' ? 1 : ran.length
        s.rows += ran.reduce((a, m) => a + m, 0)
        s.bytes += (name === 'matmulBf16' ? 1 : ran.length) * k * n * 2
        byShape.set(key, s)
      }
    }
  }
  // matmulBf16 (x, m, k, w, n, ...); matmulBf16Grouped (xs, ms, k, ws, n, ...): W is k x n bf16 codes.
  wrap('matmulBf16', (a) => ({ k: a[2] as number, n: a[4] as number, rows: [a[1] as number] }))
  wrap('matmulBf16Grouped', (a) => ({ k: a[2] as number, n: a[4] as number, rows: a[1] as number[] }))
  try {
    work()
  } finally {
    for (const [name, fn] of originals) target[name] = fn
  }
  return [...byShape].sort((a, b) => b[1].ms - a[1].ms).map(([shape, s]) => ({
    shape, calls: s.calls, entryCalls: s.entryCalls, meanRows: s.calls === 0 ? 0 : s.rows / s.calls, ms: s.ms, weightMiB: s.bytes / 2 ** 20,
  }))
}

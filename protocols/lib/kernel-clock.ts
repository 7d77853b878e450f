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

/** One weight shape's bf16 matmul calls: k x n (W's in and out features), per `work`. */
export interface MatmulShape { shape: string, calls: number, meanRows: number, ms: number, weightMiB: number }

/**
 * The bf16 matmul's time per weight shape while `work` runs (matmulBf16 and the packed entry
 * point wrapped as clockKernels wraps every kernel): which projections grow with the batch, and by
 * how much per call, where clockKernels gives only the kernel's total. Sorted by time.
 */
export function clockMatmulShapes (addon: NativeKernels, work: () => void): MatmulShape[] {
  const target = addon as unknown as Record<string, unknown>
  const byShape = new Map<string, { calls: number, rows: number, ms: number, bytes: number }>()
  const originals = new Map<string, unknown>()
  for (const name of ['matmulBf16'] as const) {
    const fn = target[name] as (...a: unknown[]) => unknown
    originals.set(name, fn)
    // (x, m, k, w, n, ...): W is k x n bf16 codes.
    target[name] = (...args: unknown[]) => {
      const t0 = performance.now()
      try {
        return fn(...args)
      } finally {
        const [m, k, n] = [args[1], args[2], args[4]] as number[]
        const key = `${k}x${n}`
        const s = byShape.get(key) ?? { calls: 0, rows: 0, ms: 0, bytes: 0 }
        s.ms += performance.now() - t0
        s.calls++
        s.rows += m
        s.bytes += k * n * 2
        byShape.set(key, s)
      }
    }
  }
  try {
    work()
  } finally {
    for (const [name, fn] of originals) target[name] = fn
  }
  return [...byShape].sort((a, b) => b[1].ms - a[1].ms).map(([shape, s]) => ({ shape, calls: s.calls, meanRows: s.rows / s.calls, ms: s.ms, weightMiB: s.bytes / 2 ** 20 }))
}

// This machine's peaks, measured in the benchmark's own process so a row's rate and the peak it is
// compared to come from the same run. On a shared machine one short run mostly measures the
// neighbours; the best of several is the closest to what the hardware can do.
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { PdBridgeError } from '../../src/errors.ts'
import { getKernelThreads, kernelParallelThreshold, measurePeakGflops, measureStreamGbps } from '../../src/kernels/index.ts'
import { loadNativeKernels, type KernelIsa } from '../../src/kernels/native.ts'
import type { MachinePeaks, MicroRecord } from './micro-record.ts'

/** Short runs per peak; the best counts. */
export const PEAK_RUNS = 5
/** The copy size of the record-level copy peaks: far past every cache. */
export const PEAK_COPY_BYTES = 256 << 20

/** Best AVX2 mul+add GFLOP/s on `threads` over `runs` runs of about 100 ms. */
export function bestGflops (threads: number, runs = PEAK_RUNS): number {
  let best = 0
  for (let r = 0; r < runs; r++) best = Math.max(best, measurePeakGflops(threads, 100))
  return best
}

/** Best streaming-copy GB/s on `threads` over `bytes` bytes (repeated up to about 64 MiB a run), `runs` runs. */
export function bestCopyGbps (threads: number, bytes: number, runs = PEAK_RUNS): number {
  const size = Math.max(32, bytes)
  const repeats = Math.max(1, Math.min(100000, Math.ceil((64 << 20) / size)))
  let best = 0
  for (let r = 0; r < runs; r++) best = Math.max(best, measureStreamGbps(threads, size, repeats))
  return best
}

/** The record-level peaks: mul+add and copy of PEAK_COPY_BYTES, on 1 thread and on every configured thread. */
export function measureMachinePeaks (runs = PEAK_RUNS): MachinePeaks {
  const threads = getKernelThreads()
  return {
    threads,
    bestOf: runs,
    gflops1Thread: bestGflops(1, runs),
    gflopsAllThreads: bestGflops(threads, runs),
    copyBytes: PEAK_COPY_BYTES,
    copyGbps1Thread: bestCopyGbps(1, PEAK_COPY_BYTES, runs),
    copyGbpsAllThreads: bestCopyGbps(threads, PEAK_COPY_BYTES, runs),
  }
}

/** The best of two measurements of the same peaks (taken at the start and the end of a run). */
export function bestOfPeaks (a: MachinePeaks, b: MachinePeaks): MachinePeaks {
  if (a.threads !== b.threads || a.copyBytes !== b.copyBytes) throw new PdBridgeError('bestOfPeaks: the two measurements are of different thread counts or copy sizes')
  return {
    threads: a.threads,
    bestOf: a.bestOf + b.bestOf,
    gflops1Thread: Math.max(a.gflops1Thread, b.gflops1Thread),
    gflopsAllThreads: Math.max(a.gflopsAllThreads, b.gflopsAllThreads),
    copyBytes: a.copyBytes,
    copyGbps1Thread: Math.max(a.copyGbps1Thread, b.copyGbps1Thread),
    copyGbpsAllThreads: Math.max(a.copyGbpsAllThreads, b.copyGbpsAllThreads),
  }
}

/** The mul+add peak of `peaks` for a call on `threads` threads (1, or all configured). */
export function gflopsPeakFor (peaks: MachinePeaks, threads: number): number {
  if (threads === 1) return peaks.gflops1Thread
  if (threads === peaks.threads) return peaks.gflopsAllThreads
  throw new PdBridgeError(`gflopsPeakFor: no measured GFLOP/s peak for ${threads} threads (1 or ${peaks.threads})`)
}

// The makefile node-gyp writes for the addon; its Release flag blocks are what the compiler got.
/** The makefile of the kernel library a variant is compiled into (the addon itself has no ISA flags). */
export function kernelMakefile (isa: KernelIsa): string {
  return fileURLToPath(new URL(`../../native/build/pdb_kernels_${isa}.target.mk`, import.meta.url))
}

/** A native build makefile's effective compiler flags (C, then C++), or none when it is not there. */
export function nativeBuildFlags (makefile: string): string[] {
  let text: string
  try {
    text = readFileSync(makefile, 'utf8')
  }
  catch {
    return []
  }
  const block = (name: string) => text.split(`${name} := \\\n`)[1]?.split('\n\n')[0] ?? ''
  const flags = (s: string) => s.split('\n').map((l) => l.replace(/\\$/, '').trim()).filter(Boolean)
  return [...flags(block('CFLAGS_Release')), ...flags(block('CFLAGS_CC_Release'))]
}

/** The native kernels as this process runs them: threads, parallel threshold, compiler flags. */
export function nativeInfo (): MicroRecord['native'] {
  const isa = loadNativeKernels().isa
  return { threads: getKernelThreads(), parallelThreshold: kernelParallelThreshold(), isa, flags: nativeBuildFlags(kernelMakefile(isa)) }
}

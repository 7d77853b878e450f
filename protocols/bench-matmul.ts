// The bf16 weight matmul (lanes8 order) before and after the lane-major tiles, side by side in one
// run, next to OpenBLAS's sgemm, on 1 and 2 threads: a micro-benchmark record
// (pd-bridge/micro-bench@1, docs/BENCHMARK-PROTOCOL.md, "Matmul before/after") under results/micro/.
// Per shape and thread count the rows run back to back (the new tiles, the earlier tiles through
// setLegacyMatmul, then OpenBLAS), so a busy machine slows each shape's rows alike; compare rows only
// within one record. Nothing is asserted. Run:
//   npx tsx protocols/bench-matmul.ts [--threads-list 1,2] [--time-ms 300] [--note TEXT] [--micro DIR]
import { mkdtempSync, rmSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { getKernelThreads, matmulBf16, setKernelThreads } from '../src/kernels/index.ts'
import { loadNativeKernels } from '../src/kernels/native.ts'
import { PdBridgeError } from '../src/errors.ts'
import { f32ToBf16 } from '../src/numerics/bf16.ts'
import { benchConfig, extraInt, extraIntList, parseBenchOptions } from '../verify/results/bench-options.ts'
import { prepareBench } from '../verify/results/bench-setup.ts'
import { MICRO_RECORD_SCHEMA, microRunId, OPENBLAS_ROW_NAME, writeMicroRecord, type KernelRow, type MicroRecord } from '../verify/results/micro-record.ts'
import { bestOfPeaks, gflopsPeakFor, measureMachinePeaks, nativeInfo } from '../verify/results/peaks.ts'
import { helpAndExit, readOptions } from './bench-cli.ts'
import { filled, measure } from './lib/bench-timing.ts'
import { startOpenBlas } from './openblas/sgemm.ts'

helpAndExit(`Usage: npx tsx protocols/bench-matmul.ts [options]

The bf16 weight matmul (lanes8) with the lane-major tiles and with the earlier tiles, and OpenBLAS's
sgemm, at m = 16, 128, 512 and k, n from 256 to 4096, one micro-benchmark record in --micro.

  --threads-list L       kernel thread counts, comma-separated (default 1,2)
  --preset NAME          the embedded configuration the record is filed under (default tiny)
  --time-ms N            tinybench time per case (default 300, or $PDB_BENCH_TIME_MS)
  --note TEXT            kept in the record (default $PDB_BENCH_NOTE)
  --micro DIR            where the record goes (default results/micro)
  -h, --help             this text (nothing is measured or written)
`)
const { options, TIME_MS, THREADS } = readOptions('bench-matmul', () => {
  const options = parseBenchOptions(process.argv.slice(2), ['tiny'], ['time-ms', 'threads-list'])
  if (options.presets.length !== 1) throw new PdBridgeError('--preset: the matmul benchmark files its record under one configuration')
  return { options, TIME_MS: extraInt(options, 'time-ms', Number(process.env.PDB_BENCH_TIME_MS ?? 300)), THREADS: extraIntList(options, 'threads-list', [1, 2]) }
})
const WARMUP_MS = 100
const NEW = 'matmulBf16 lanes8 lane-major tiles'
const OLD = 'matmulBf16 lanes8 earlier tiles'

const SHAPES: Array<[number, number, number]> = []
for (const m of [16, 128, 512]) {
  for (const [k, n] of [[256, 256], [1024, 1024], [4096, 1024], [1024, 4096], [4096, 4096]]) {
    if (m === 512 && k * n > 4096 * 1024) continue // a call over a second: too few samples on 2 shared cores
    SHAPES.push([m, k, n])
  }
}

async function main (): Promise<void> {
  const startedAt = new Date().toISOString()
  const loadBefore = loadavg() as [number, number, number]
  const scratch = mkdtempSync(join(tmpdir(), 'pd-bridge-bench-matmul-'))
  const setup = await prepareBench(benchConfig(options, options.presets[0]), scratch).finally(() => rmSync(scratch, { recursive: true, force: true }))
  const addon = loadNativeKernels()
  if (addon.setLegacyMatmul === undefined) throw new PdBridgeError('this addon build has no setLegacyMatmul: run npm run build:native')
  const setLegacy = addon.setLegacyMatmul
  const configured = getKernelThreads()
  const startPeaks = measureMachinePeaks()
  const rows: KernelRow[] = []
  const openblasInfo: Record<string, string> = {}
  for (const threads of THREADS) {
    setKernelThreads(threads)
    const openblas = await startOpenBlas(threads)
    openblasInfo[`openblas ${threads} thread(s)`] = 'error' in openblas ? `not measured: ${openblas.error}` : openblas.info.openblas ?? openblas.info.blas.join(', ')
    for (const [m, k, n] of SHAPES) {
      const x = filled(m * k, 1)
      const wb = Uint16Array.from(filled(n * k, 2, 0.05), (v) => f32ToBf16(v))
      const out = new Float32Array(m * n)
      const flops = 2 * m * n * k
      const shape = `m=${m} k=${k} n=${n}`
      const timed: Array<[string, { meanMs: number, p50Ms: number, samples: number }, number, 'tinybench-p50' | 'timed-median']> = []
      for (const [name, legacy] of [[NEW, false], [OLD, true]] as const) {
        setLegacy(legacy)
        timed.push([name, await measure(name, () => { matmulBf16(x, m, k, wb, n, out) }, TIME_MS, WARMUP_MS), 4 * m * k + 2 * n * k + 4 * m * n, 'tinybench-p50'])
      }
      setLegacy(false)
      if (!('error' in openblas)) timed.push([OPENBLAS_ROW_NAME, await openblas.time(m, k, n, TIME_MS), 4 * (m * k + n * k + m * n), 'timed-median'])
      for (const [name, t, bytes, method] of timed) {
        const seconds = t.p50Ms / 1000
        rows.push({
          suite: 'kernels', name, shape, threads, rate: flops / seconds / 1e9, unit: 'GFLOP/s', peak: 0, peakOf: '', percentOfPeak: 0,
          samples: t.samples, method, kernel: { p50Ms: t.p50Ms, meanMs: t.meanMs, flops, bytes, gflops: flops / seconds / 1e9, gbps: bytes / seconds / 1e9 },
        })
      }
      const rate = (name: string) => rows.find((r) => r.name === name && r.shape === shape && r.threads === threads)?.rate
      const [a, b, c] = [rate(NEW), rate(OLD), rate(OPENBLAS_ROW_NAME)]
      console.log(`${shape} threads=${threads}: lane-major ${a?.toFixed(1)}, earlier ${b?.toFixed(1)} (${a !== undefined && b !== undefined ? (a / b).toFixed(2) : '?'}x), ` +
        `sgemm ${c?.toFixed(1) ?? 'n/a'} GFLOP/s (lane-major ${a !== undefined && c !== undefined ? (a / c).toFixed(2) : '?'}x of it)`)
    }
    if (!('error' in openblas)) openblas.close()
  }
  setKernelThreads(configured)
  const peaks = bestOfPeaks(startPeaks, measureMachinePeaks())
  for (const r of rows) {
    r.peak = gflopsPeakFor(peaks, r.threads)
    r.peakOf = `mul+add, ${r.threads} thread${r.threads === 1 ? '' : 's'}`
    r.percentOfPeak = 100 * r.rate / r.peak
  }
  const record: MicroRecord = {
    schema: MICRO_RECORD_SCHEMA,
    runId: microRunId(startedAt, 'kernels', 'matmul'),
    startedAt,
    suite: 'kernels',
    environment: setup.environment,
    load: { before: loadBefore, after: loadavg() as [number, number, number] },
    note: options.note,
    native: nativeInfo(),
    settings: { timePerTaskMs: TIME_MS, warmupMs: WARMUP_MS, rateFrom: 'p50 latency of tinybench samples (OpenBLAS rows: the median of timed calls in the child)', order: 'per shape: lane-major, earlier, OpenBLAS', ...openblasInfo },
    peaks,
    rows,
  }
  console.log(`\nwrote ${await writeMicroRecord(options.microDir, record)}`)
}

await main()

// Kernel speed next to this machine's measured peaks, as a micro-benchmark record
// (pd-bridge/micro-bench@1, docs/BENCHMARK-PROTOCOL.md) under results/micro/. Run:
//   npx tsx protocols/bench-kernels.ts [--preset tiny] [--block-size 256] [--note TEXT] [--micro DIR] [--time-ms 400]
// The record is filed under the environment of the embedded stack's configuration (default: the
// embedded default, as cold-bench runs it), so it sits next to those runs in RESULTS.md. Nothing
// here is asserted: speeds depend on the machine and on whatever else it is running.
import { mkdtempSync, rmSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import {
  attentionMqa, fmathArray, getKernelThreads, indexerScores, kernelParallelThreshold, matmulBf16, matmulF32, matmulPacked, packSequentialFma,
  reference, rmsNorm, softmaxPool,
} from '../src/kernels/index.ts'
import { loadNativeKernels } from '../src/kernels/native.ts'
import { PdBridgeError } from '../src/errors.ts'
import { helpAndExit, readOptions } from './bench-cli.ts'
import { startOpenBlas } from './openblas/sgemm.ts'
import { filled, measure as measureFor } from './lib/bench-timing.ts'
import { f32ToBf16 } from '../src/numerics/bf16.ts'
import { benchConfig, extraInt, parseBenchOptions } from '../verify/results/bench-options.ts'
import { prepareBench } from '../verify/results/bench-setup.ts'
import { MICRO_RECORD_SCHEMA, microRunId, OPENBLAS_ROW_NAME, writeMicroRecord, type KernelRow, type MicroRecord } from '../verify/results/micro-record.ts'
import { bestCopyGbps, bestOfPeaks, gflopsPeakFor, measureMachinePeaks, nativeInfo } from '../verify/results/peaks.ts'
import { formatBytes } from '../verify/results/tables.ts'

helpAndExit(`Usage: npx tsx protocols/bench-kernels.ts [options]

Kernel speed next to this machine's measured peaks, one micro-benchmark record in --micro
(docs/BENCHMARK-PROTOCOL.md, "Micro benchmarks").

  --preset NAME          the embedded configuration the record is filed under (default tiny)
  --seed N               its checkpoint seed (default 1)
  --block-size N         its decoder block size (default 256)
  --prefill-profile P    its prefill profile (default decoder)
  --time-ms N            tinybench time per case (default 400, or $PDB_BENCH_TIME_MS)
  --note TEXT            kept in the record (default $PDB_BENCH_NOTE)
  --micro DIR            where the record goes (default results/micro)

Every matmul shape is also timed with OpenBLAS's sgemm through numpy, in a child process on the
same threads, right after our rows at that shape ($PDB_OPENBLAS_PYTHON, default /usr/bin/python3;
without numpy the record says why and has no OpenBLAS rows).
  -h, --help             this text (nothing is measured or written)
`)
const { options, TIME_MS } = readOptions('bench-kernels', () => {
  const options = parseBenchOptions(process.argv.slice(2), ['tiny'], ['time-ms'])
  if (options.presets.length !== 1) throw new PdBridgeError('--preset: the kernel benchmark files its record under one configuration')
  return { options, TIME_MS: extraInt(options, 'time-ms', Number(process.env.PDB_BENCH_TIME_MS ?? 400)) }
})
const WARMUP_MS = 100

/** What one row measured, before the peak it is compared to is known. */
interface Measured {
  kernel: string
  shape: string
  threads: number
  meanMs: number
  p50Ms: number
  samples: number
  flops: number
  bytes: number
  gflops: number
  gbps: number
  /** The rate that matters: GFLOP/s for matmul, attention and indexer; GB/s for the rest. */
  unit: 'GFLOP/s' | 'GB/s'
  rate: number
  /** GB/s rows: a copy moving the same bytes on the same threads, measured right after the kernel. */
  copyPeak?: number
  method?: 'tinybench-p50' | 'timed-median'
}

async function measure (name: string, fn: () => void): Promise<{ meanMs: number, p50Ms: number, samples: number }> {
  return measureFor(name, fn, TIME_MS, WARMUP_MS)
}

/** A copy moving `traffic` bytes (read + write) on `threads`: buffers of half that each. */
function peakCopyGbps (threads: number, traffic: number): number {
  return bestCopyGbps(threads, Math.ceil(traffic / 2))
}

async function main (): Promise<void> {
  const startedAt = new Date().toISOString()
  const loadBefore = loadavg() as [number, number, number]
  // The checkpoint and sidecar are made only for their fingerprint (the environment id).
  const scratch = mkdtempSync(join(tmpdir(), 'pd-bridge-bench-kernels-'))
  const setup = await prepareBench(benchConfig(options, options.presets[0]), scratch).finally(() => rmSync(scratch, { recursive: true, force: true }))
  const threads = getKernelThreads()
  const threshold = kernelParallelThreshold()
  const threadsFor = (work: number) => (work < threshold ? 1 : threads)
  console.log(`environment ${setup.environment.id} (${setup.environment.model}); measuring peaks (${threads} thread(s) configured)...`)
  const startPeaks = measureMachinePeaks()
  const rows: Measured[] = []

  const openblas = await startOpenBlas(threads)
  const openblasSettings: Record<string, string> = 'error' in openblas
    ? { openblas: `not measured: ${openblas.error}` }
    : { openblas: openblas.info.openblas ?? `not OpenBLAS: ${openblas.info.blas.join(', ')}`, numpy: openblas.info.numpy }
  console.log(`OpenBLAS reference: ${openblasSettings.openblas}`)
  const matmulShapes: Array<[number, number, number]> = []
  for (const m of [1, 128]) {
    for (const [k, n] of [[256, 256], [1024, 1024], [4096, 256], [4096, 512], [4096, 1024], [4096, 4096]]) matmulShapes.push([m, k, n])
  }
  for (const [m, k, n] of matmulShapes) {
    const x = filled(m * k, 1)
    const w = filled(n * k, 2, 0.05)
    const wb = Uint16Array.from(w, (v) => f32ToBf16(v))
    const out = new Float32Array(m * n)
    const flops = 2 * m * n * k
    const used = threadsFor(m * n * k)
    const fma = { order: 'lanes8-fma' } as const
    const seq = { order: 'sequential-fma' } as const
    // W packed once, as a profile would at load (not timed): the tiles read the strips where they lie.
    const packed = packSequentialFma(w, n, k)
    const packedB = packSequentialFma(wb, n, k)
    for (const [kernel, fn, weightBytes] of [
      ['matmulF32', () => { matmulF32(x, m, k, w, n, out) }, 4],
      ['matmulBf16', () => { matmulBf16(x, m, k, wb, n, out) }, 2],
      ['matmulF32 lanes8-fma', () => { matmulF32(x, m, k, w, n, out, fma) }, 4],
      ['matmulBf16 lanes8-fma', () => { matmulBf16(x, m, k, wb, n, out, fma) }, 2],
      ['matmulF32 sequential-fma', () => { matmulF32(x, m, k, w, n, out, seq) }, 4],
      ['matmulBf16 sequential-fma', () => { matmulBf16(x, m, k, wb, n, out, seq) }, 2],
      ['matmulF32 sequential-fma packed', () => { matmulPacked(x, m, k, packed, out) }, 4],
      ['matmulBf16 sequential-fma packed', () => { matmulPacked(x, m, k, packedB, out) }, 2],
    ] as const) {
      const t = await measure(kernel, fn)
      const seconds = t.p50Ms / 1000
      const bytes = 4 * m * k + weightBytes * n * k + 4 * m * n
      const gflops = flops / seconds / 1e9
      rows.push({ kernel, shape: `m=${m} k=${k} n=${n}`, threads: used, ...t, flops, bytes, gflops, gbps: bytes / seconds / 1e9, unit: 'GFLOP/s', rate: gflops })
    }
    if (!('error' in openblas)) { // the same shape through OpenBLAS, right after ours, on the configured threads
      const t = await openblas.time(m, k, n, TIME_MS)
      const seconds = t.p50Ms / 1000
      const bytes = 4 * (m * k + n * k + m * n)
      const gflops = flops / seconds / 1e9
      rows.push({ kernel: OPENBLAS_ROW_NAME, shape: `m=${m} k=${k} n=${n}`, threads, ...t, flops, bytes, gflops, gbps: bytes / seconds / 1e9, unit: 'GFLOP/s', rate: gflops, method: 'timed-median' })
    }
  }
  if (!('error' in openblas)) openblas.close()

  { // The TypeScript reference at one small shape, for scale.
    const [m, k, n] = [1, 1024, 1024]
    const x = filled(m * k, 3)
    const w = filled(n * k, 4, 0.05)
    const out = new Float32Array(m * n)
    const t = await measure('reference.matmulF32', () => { reference.matmulF32(x, m, k, w, n, out) })
    const seconds = t.p50Ms / 1000
    const flops = 2 * m * n * k
    const bytes = 4 * (m * k + n * k + m * n)
    const gflops = flops / seconds / 1e9
    rows.push({ kernel: 'reference.matmulF32', shape: `m=${m} k=${k} n=${n}`, threads: 1, ...t, flops, bytes, gflops, gbps: bytes / seconds / 1e9, unit: 'GFLOP/s', rate: gflops })
  }

  for (const rowsN of [1, 128]) {
    for (const d of [128, 512, 4096]) {
      const x = filled(rowsN * d, 5, 3)
      const weight = filled(d, 6)
      const out = new Float32Array(rowsN * d)
      const bytes = (2 * rowsN * d + d) * 4 // read x and weight, write y
      const flops = 5 * rowsN * d // x*x, add, x*r, *w (+ per-row scalars, ignored)
      const used = threadsFor(rowsN * d)
      const t = await measure('rmsNorm', () => { rmsNorm(x, rowsN, d, weight, 1e-6, out) })
      const seconds = t.p50Ms / 1000
      const gbps = bytes / seconds / 1e9
      const copyPeak = peakCopyGbps(used, bytes)
      rows.push({ kernel: 'rmsNorm', shape: `rows=${rowsN} d=${d}`, threads: used, ...t, flops, bytes, gflops: flops / seconds / 1e9, gbps, unit: 'GB/s', rate: gbps, copyPeak })
    }
  }

  // Attention: sliding-window prefill (every query sees the 128 latest rows) and one decode query
  // over 128 window rows + 512 compressed entries. Flops: 2 per multiply-add of the scores and of
  // the weighted value sum (4 H D per key); the softmax's exps are not counted.
  for (const [h, d] of [[4, 128], [8, 256], [64, 512]] as const) {
    for (const [label, t, keysPer] of [['prefill', 1024, 128], ['decode', 1, 640]] as const) {
      if (h === 64 && label === 'prefill') continue
      const n = Math.max(t, keysPer)
      const offsets = new Int32Array(t + 1)
      const keyList: number[] = []
      for (let i = 0; i < t; i++) {
        const last = label === 'prefill' ? i : n - 1
        for (let j = Math.max(0, last - keysPer + 1); j <= last; j++) keyList.push(j)
        offsets[i + 1] = keyList.length
      }
      const keys = Int32Array.from(keyList)
      const q = filled(t * h * d, 7)
      const kv = filled(n * d, 8)
      const sinks = filled(h, 9)
      const out = new Float32Array(t * h * d)
      const flops = 4 * keys.length * h * d
      const used = threadsFor(keys.length * h * d * 2)
      const r = await measure('attentionMqa', () => { attentionMqa(q, t, h, d, kv, n, offsets, keys, sinks, 1 / Math.sqrt(d), out) })
      const seconds = r.p50Ms / 1000
      const bytes = 4 * (2 * t * h * d + keys.length * d)
      const gflops = flops / seconds / 1e9
      rows.push({ kernel: 'attentionMqa', shape: `${label} T=${t} H=${h} D=${d} keys/query=${keysPer}`, threads: used, ...r, flops, bytes, gflops, gbps: bytes / seconds / 1e9, unit: 'GFLOP/s', rate: gflops })
    }
  }

  // Indexer scores: T queries against N entries, query t seeing floor((t + 1) / 4) of them (the CSA
  // causality); flops 2 Hi Di per visible (query, entry).
  for (const [t, n, h, d] of [[1024, 256, 4, 128], [512, 1024, 8, 128], [1, 4096, 64, 128]] as const) {
    const q = filled(t * h * d, 10)
    const entries = filled(n * d, 11)
    const weights = filled(t * h, 12)
    const visible = Int32Array.from({ length: t }, (_, i) => (t === 1 ? n : Math.min(n, Math.floor((i + 1) / 4))))
    const out = new Float32Array(t * n)
    let pairs = 0
    for (const v of visible) pairs += v
    const flops = 2 * pairs * h * d
    const used = threadsFor(pairs * h * d)
    const r = await measure('indexerScores', () => { indexerScores(q, t, h, d, entries, n, weights, visible, 1 / Math.sqrt(d), 0.125, out) })
    const seconds = r.p50Ms / 1000
    const bytes = 4 * (t * h * d + n * d + t * n)
    const gflops = flops / seconds / 1e9
    rows.push({ kernel: 'indexerScores', shape: `T=${t} N=${n} Hi=${h} Di=${d}`, threads: used, ...r, flops, bytes, gflops, gbps: bytes / seconds / 1e9, unit: 'GFLOP/s', rate: gflops })
  }

  // Pooling (one exp per input element) and the bulk exp / silu: GB/s of inputs read and outputs
  // written, next to a copy of the same bytes.
  for (const [w, r, d] of [[1024, 8, 512], [1, 8, 512], [64, 128, 512]] as const) {
    const kv = filled(w * r * d, 13)
    const gate = filled(w * r * d, 14, 4)
    const out = new Float32Array(w * d)
    const used = threadsFor(w * r * d * 16)
    const t = await measure('softmaxPool', () => { softmaxPool(kv, gate, w, r, d, out) })
    const seconds = t.p50Ms / 1000
    const bytes = 4 * (2 * w * r * d + w * d)
    const gbps = bytes / seconds / 1e9
    const copyPeak = peakCopyGbps(used, bytes)
    rows.push({ kernel: 'softmaxPool', shape: `W=${w} rows=${r} d=${d}`, threads: used, ...t, flops: 0, bytes, gflops: 0, gbps, unit: 'GB/s', rate: gbps, copyPeak })
  }
  for (const name of ['exp', 'silu'] as const) {
    const x = filled(1 << 22, 15, 30)
    const out = new Float32Array(x.length)
    const used = threadsFor(x.length * 16)
    const t = await measure(`fmathArray ${name}`, () => { fmathArray(name, x, out) })
    const seconds = t.p50Ms / 1000
    const bytes = 8 * x.length
    const gbps = bytes / seconds / 1e9
    const copyPeak = peakCopyGbps(used, bytes)
    rows.push({ kernel: `fmathArray ${name}`, shape: `n=${x.length}`, threads: used, ...t, flops: 0, bytes, gflops: 0, gbps, unit: 'GB/s', rate: gbps, copyPeak })
  }

  { // The blocks128 accumulation order at one prefill shape, next to the lanes8 rows above.
    const [m, k, n] = [128, 4096, 1024]
    const x = filled(m * k, 16)
    const w = filled(n * k, 17, 0.05)
    const out = new Float32Array(m * n)
    const flops = 2 * m * n * k
    const used = threadsFor(m * n * k)
    const t = await measure('matmulF32 blocks128', () => { matmulF32(x, m, k, w, n, out, { order: 'blocks128' }) })
    const seconds = t.p50Ms / 1000
    const bytes = 4 * (m * k + n * k + m * n)
    const gflops = flops / seconds / 1e9
    rows.push({ kernel: 'matmulF32 blocks128', shape: `m=${m} k=${k} n=${n}`, threads: used, ...t, flops, bytes, gflops, gbps: bytes / seconds / 1e9, unit: 'GFLOP/s', rate: gflops })
  }

  // Measure the peaks again at the end and keep the best of both ends of the run: a compute rate
  // is compared to the mul+add peak of this record for its thread count.
  const peaks = bestOfPeaks(startPeaks, measureMachinePeaks())
  const loadAfter = loadavg() as [number, number, number]
  const out: KernelRow[] = rows.map((r) => {
    const peak = r.unit === 'GFLOP/s' ? gflopsPeakFor(peaks, r.threads) : r.copyPeak!
    const peakOf = r.unit === 'GFLOP/s'
      ? `mul+add, ${r.threads} thread${r.threads === 1 ? '' : 's'}`
      : `copy moving the same ${formatBytes(r.bytes)}, ${r.threads} thread${r.threads === 1 ? '' : 's'}`
    return {
      suite: 'kernels',
      name: r.kernel,
      shape: r.shape,
      threads: r.threads,
      rate: r.rate,
      unit: r.unit,
      peak,
      peakOf,
      percentOfPeak: 100 * r.rate / peak,
      samples: r.samples,
      method: r.method ?? 'tinybench-p50',
      kernel: { p50Ms: r.p50Ms, meanMs: r.meanMs, flops: r.flops, bytes: r.bytes, gflops: r.gflops, gbps: r.gbps },
    }
  })

  console.log(`\npeak ${loadNativeKernels().isa} mul+add (8 lanes, no FMA), best of ${peaks.bestOf} (start and end): ${peaks.gflops1Thread.toFixed(1)} GFLOP/s on 1 thread, ${peaks.gflopsAllThreads.toFixed(1)} GFLOP/s on ${threads}`)
  console.log(`streaming copy of ${formatBytes(peaks.copyBytes)}, best of ${peaks.bestOf}: ${peaks.copyGbps1Thread.toFixed(1)} GB/s on 1 thread, ${peaks.copyGbpsAllThreads.toFixed(1)} GB/s on ${threads}`)
  console.log('GFLOP/s rows: the mul+add peak for the threads used; GB/s rows: a copy moving the same bytes on the same threads\n')
  console.table(out.map((r) => ({
    kernel: r.name,
    shape: r.shape,
    threads: r.threads,
    'p50 ms': Number(r.kernel.p50Ms.toFixed(4)),
    rate: `${r.rate.toFixed(2)} ${r.unit}`,
    'GB/s moved': Number(r.kernel.gbps.toFixed(1)),
    peak: `${r.peak.toFixed(1)} ${r.unit}`,
    '% peak': Number(r.percentOfPeak.toFixed(1)),
    'vs OpenBLAS': vsOpenBlas(r, out) ?? '',
  })))

  for (const shape of ['m=128 k=4096 n=4096', 'm=1 k=4096 n=4096']) {
    const pick = (name: string) => out.find((r) => r.name === name && r.shape === shape)
    const summary = ['matmulF32', 'matmulF32 lanes8-fma', 'matmulF32 sequential-fma', 'matmulF32 sequential-fma packed',
      'matmulBf16', 'matmulBf16 lanes8-fma', 'matmulBf16 sequential-fma', 'matmulBf16 sequential-fma packed']
      .map((name) => `${name} ${vsOpenBlas(pick(name), out) ?? 'n/a'}`)
    console.log(`${shape} vs OpenBLAS sgemm: ${summary.join(', ')}`)
  }

  const record: MicroRecord = {
    schema: MICRO_RECORD_SCHEMA,
    runId: microRunId(startedAt, 'kernels'),
    startedAt,
    suite: 'kernels',
    environment: setup.environment,
    load: { before: loadBefore, after: loadAfter },
    note: options.note,
    native: nativeInfo(),
    settings: { timePerTaskMs: TIME_MS, warmupMs: WARMUP_MS, rateFrom: 'p50 latency of tinybench samples (OpenBLAS rows: the median of timed calls in the child)', ...openblasSettings },
    peaks,
    rows: out,
  }
  console.log(`\nwrote ${await writeMicroRecord(options.microDir, record)}`)
}

/** A matmul row's rate over the OpenBLAS row of the same shape in `rows` (as `1.07x`), if there is one. */
function vsOpenBlas (row: KernelRow | undefined, rows: KernelRow[]): string | undefined {
  if (row === undefined || !row.name.startsWith('matmul')) return undefined
  const blas = rows.find((r) => r.name === OPENBLAS_ROW_NAME && r.shape === row.shape)
  return blas === undefined ? undefined : `${(row.rate / blas.rate).toFixed(2)}x`
}

await main()

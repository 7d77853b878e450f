// The two cache maths side by side, as one micro-benchmark record (pd-bridge/micro-bench@1,
// docs/BENCHMARK-PROTOCOL.md) under results/micro/. Run:
//   npx tsx protocols/bench-cache-math.ts [--preset tiny] [--tokens 1024] [--replays 3] [--time-ms 400] [--note TEXT] [--micro DIR]
// Rows, each a kernels-suite row (GFLOP/s of the projections' multiply-adds, next to the mul+add peak):
//   - the capture hook's whole kv path over T tokens of every layer, `decoder` (the profile's own
//     sidecar, as the stack exports it) and `mlx-cpu` (export-weights --cache-math mlx-cpu), fed the
//     same attention inputs (bf16 values), the median of --replays timed passes each, interleaved
//     (the passes' CPU time and both ratios go into the record's settings);
//   - the kv projection at a V4 width (k = 4096, n = 512; m = 1, 16, 128 and 512, the row counts a capture feeds): the decoder profile's
//     matmulBf16, the mlx-cpu mxfp8 and affine kernels in native code, and their TypeScript
//     references (m = 1 only: they are scalar loops); the mxfp8 kernel again on an x holding one
//     denormal (the integer roundings) and on one holding a NaN that could carry (NaN checks kept);
//     the record's settings name the path each native row took;
//   - the one scan of each prepared weight (mxfp8FromStrips, affineFromStrips: what a call paid
//     before the weights were scanned once, when prepared), so its share is isolated.
// Nothing here is asserted: times depend on the machine and on whatever else it is running.
import { mkdtempSync, rmSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { Bench } from 'tinybench'
import { exportWeights, PoolingHook, sidecarWeightSpecs, type Sidecar } from '../src/capture/index.ts'
import { PdBridgeError } from '../src/errors.ts'
import { getKernelThreads, kernelParallelThreshold, matmulBf16 } from '../src/kernels/index.ts'
import { f32ToBf16 } from '../src/numerics/bf16.ts'
import {
  affineDequantized, affineMatmul, affineQuantize, bf16, MLX_CPU, mxfp8Matmul, mxfp8Quantize,
} from '../src/numerics/mlx-cpu/index.ts'
import {
  affineFromStrips, affineMatmulNative, mlxCpuLastMatmulPath, mxfp8FromStrips, mxfp8MatmulNative, prepareAffine, prepareMxfp8,
} from '../src/kernels/mlx-cpu.ts'
import { helpAndExit, readOptions } from './bench-cli.ts'
import { benchConfig, extraInt, parseBenchOptions } from '../verify/results/bench-options.ts'
import { prepareBench } from '../verify/results/bench-setup.ts'
import { median } from '../verify/results/summary.ts'
import { MICRO_RECORD_SCHEMA, microRunId, writeMicroRecord, type KernelRow, type MicroRecord } from '../verify/results/micro-record.ts'
import { bestCopyGbps, bestOfPeaks, gflopsPeakFor, measureMachinePeaks, nativeInfo } from '../verify/results/peaks.ts'
import { formatBytes } from '../verify/results/tables.ts'

helpAndExit(`Usage: npx tsx protocols/bench-cache-math.ts [options]

The decoder and mlx-cpu cache maths side by side, one micro-benchmark record in --micro
(docs/BENCHMARK-PROTOCOL.md, "Micro benchmarks").

  --preset NAME          the checkpoint preset (default tiny; one)
  --tokens N             attention-input rows per layer fed to each capture hook (default 1024)
  --replays N            timed passes of each hook, interleaved (default 3)
  --time-ms N            tinybench time per kernel case (default 400, or $PDB_BENCH_TIME_MS)
  --seed N               its checkpoint seed (default 1)
  --block-size N         the sidecars' block size (default 256)
  --prefill-profile P    filed in the environment (default decoder)
  --note TEXT            kept in the record (default $PDB_BENCH_NOTE)
  --micro DIR            where the record goes (default results/micro)
  -h, --help             this text (nothing is measured or written)
`)
const { options, TOKENS, REPLAYS, TIME_MS } = readOptions('bench-cache-math', () => {
  const options = parseBenchOptions(process.argv.slice(2), ['tiny'], ['tokens', 'replays', 'time-ms'])
  if (options.presets.length !== 1) throw new PdBridgeError('--preset: the cache-math benchmark files its record under one configuration')
  return {
    options,
    TOKENS: extraInt(options, 'tokens', 1024),
    REPLAYS: extraInt(options, 'replays', 3),
    TIME_MS: extraInt(options, 'time-ms', Number(process.env.PDB_BENCH_TIME_MS ?? 400)),
  }
})

/** A row; `copyPeak` (GB/s of a copy moving the same bytes) makes it a memory-bound GB/s row. */
interface Measured { name: string, shape: string, threads: number, ms: number, samples: number, method: 'tinybench-p50' | 'timed-median', flops: number, bytes: number, copyPeak?: number }

/** bf16 values from an LCG, spread like normalised activations. */
function bf16Values (n: number, seed: number, scale = 1): Float32Array {
  const out = new Float32Array(n)
  let s = seed >>> 0
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0
    out[i] = bf16((s / 4294967296 - 0.5) * 2 * scale)
  }
  return out
}

/** Process CPU time per call of fn (every thread), over calls adding up to at least 100 ms of it (at most 200 calls). */
function cpuPerCall (fn: () => void): number {
  const c0 = process.cpuUsage()
  let calls = 0
  let used = 0
  while (used < 100 && calls < 200) {
    fn()
    calls++
    const c = process.cpuUsage(c0)
    used = (c.user + c.system) / 1000
  }
  return used / calls
}

async function tiny (name: string, fn: () => void): Promise<{ ms: number, samples: number }> {
  const bench = new Bench({ time: TIME_MS, warmupTime: 100, iterations: 5 })
  bench.add(name, fn)
  await bench.run()
  const r = bench.tasks[0].result
  if (r.state !== 'completed') throw new PdBridgeError(`benchmark ${name} ended as ${r.state}`)
  return { ms: r.latency.p50, samples: r.latency.samplesCount }
}

/** Multiply-adds per attention-input row over every layer's kv-path linears (the same for both maths). */
function macsPerRow (sidecar: Sidecar): number {
  return sidecarWeightSpecs(sidecar.json).filter((w) => w.kind === 'linear').reduce((a, w) => a + w.shape[0] * w.shape[1], 0)
}

/**
 * One pass of a fresh hook over `inputs` (one [T, hidden] array per layer), fed in block-size
 * chunks: its wall time and the process's CPU time (every thread's) in ms. On a shared machine the
 * CPU time is the steadier of the two (a pass that loses its core waits without counting).
 */
function hookPass (sidecar: Sidecar, inputs: Float32Array[], T: number): { wall: number, cpu: number } {
  const hook = new PoolingHook(sidecar.kvPath, { blockSize: sidecar.json.blockSize })
  const h = sidecar.hiddenSize
  const bs = sidecar.json.blockSize
  const t0 = performance.now()
  const c0 = process.cpuUsage()
  inputs.forEach((x, layer) => {
    for (let at = 0; at < T; at += bs) {
      const n = Math.min(bs, T - at)
      hook.feed(layer, at, x.subarray(at * h, (at + n) * h), n)
    }
  })
  const c = process.cpuUsage(c0)
  return { wall: performance.now() - t0, cpu: (c.user + c.system) / 1000 }
}

async function main (): Promise<void> {
  const startedAt = new Date().toISOString()
  const loadBefore = loadavg() as [number, number, number]
  const scratch = mkdtempSync(join(tmpdir(), 'pd-bridge-bench-cache-math-'))
  const rows: Measured[] = []
  const threads = getKernelThreads()
  const threadsFor = (work: number): number => (work < kernelParallelThreshold() ? 1 : threads)
  let environment
  try {
    const setup = await prepareBench(benchConfig(options, options.presets[0]), scratch)
    environment = setup.environment
    const decoder = setup.sidecar
    const mlx = await exportWeights({ model: setup.checkpointDir, profile: decoder.profile, out: join(scratch, 'mlx-sidecar'), blockSize: decoder.json.blockSize, cacheMath: 'mlx-cpu' })
    console.log(`environment ${environment.id} (${environment.model}); ${threads} thread(s); measuring peaks...`)
    const startPeaks = measureMachinePeaks()
    const T = TOKENS
    const inputs = decoder.json.layers.map((_, i) => bf16Values(T * decoder.hiddenSize, 100 + i))
    const flops = 2 * T * macsPerRow(decoder)
    const times: Record<'decoder' | 'mlx-cpu', number[]> = { decoder: [], 'mlx-cpu': [] }
    const cpuTimes: Record<'decoder' | 'mlx-cpu', number[]> = { decoder: [], 'mlx-cpu': [] }
    hookPass(decoder, inputs, T) // warm both paths once, untimed
    hookPass(mlx, inputs, T)
    for (let r = 0; r < REPLAYS; r++) {
      for (const [math, sidecar] of [['decoder', decoder], ['mlx-cpu', mlx]] as const) {
        const t = hookPass(sidecar, inputs, T)
        times[math].push(t.wall)
        cpuTimes[math].push(t.cpu)
      }
    }
    for (const math of ['decoder', 'mlx-cpu'] as const) {
      const ms = median(times[math])!
      rows.push({ name: `capture hook, cache math ${math}`, shape: `${options.presets[0]} T=${T} all layers`, threads, ms, samples: REPLAYS, method: 'timed-median', flops, bytes: 4 * T * decoder.hiddenSize * inputs.length })
      console.log(`capture hook ${math}: ${ms.toFixed(1)} ms (passes ${times[math].map((t) => t.toFixed(0)).join(', ')}); CPU time ${median(cpuTimes[math])!.toFixed(1)} ms`)
    }

    // The kv projection at a V4 width; next to each tinybench row, its CPU time per call.
    const kernelCpu: Record<string, number> = {}
    const kernelPath: Record<string, string> = {}
    const [k, n] = [4096, 512]
    const w = bf16Values(n * k, 7, 0.05)
    const wb = Uint16Array.from(w, f32ToBf16)
    const mx = mxfp8Quantize(w, n, k)
    const mxw = { codes: mx.codes, scales: mx.scales, n, k }
    const aq = affineQuantize(w, n, k, 8, 64)
    const aw = { codes: aq.codes, scales: aq.scales, biases: aq.biases, n, k, groupSize: 64 }
    const deq = affineDequantized(aw, MLX_CPU)
    const pmx = prepareMxfp8(mxw)
    const paf = prepareAffine(aw, MLX_CPU, deq)
    // The weights' one scan, alone (one thread: it is a single pass): 4 bytes read per value,
    // a GB/s row next to a copy moving as many bytes.
    const scans: Array<[string, () => void, number]> = [
      ['mlx-cpu mxfp8 g32 weight scan (once, when prepared)', () => { mxfp8FromStrips(pmx.wt, pmx.st, n, k) }, 4 * (pmx.wt.length + pmx.st.length)],
      ['mlx-cpu affine-8 g64 weight scan (once, when prepared)', () => { affineFromStrips(paf.wt, n, k) }, 4 * paf.wt.length],
    ]
    for (const [name, fn, bytes] of scans) {
      const t = await tiny(name, fn)
      kernelCpu[`cpuMs ${name}`] = cpuPerCall(fn)
      rows.push({ name, shape: `k=${k} n=${n}`, threads: 1, ms: t.ms, samples: t.samples, method: 'tinybench-p50', flops: 0, bytes, copyPeak: bestCopyGbps(1, Math.ceil(bytes / 2)) })
    }
    for (const m of [1, 16, 128, 512]) {
      const x = bf16Values(m * k, 8)
      const out = new Float32Array(m * n)
      const f = 2 * m * n * k
      const used = threadsFor(m * n * k)
      const cases: Array<[string, () => void, number, number]> = [
        ['decoder matmulBf16 (profile order)', () => { matmulBf16(x, m, k, wb, n, out, { order: decoder.profile.matmulOrder }) }, used, 2],
        ['mlx-cpu mxfp8 g32 native', () => { mxfp8MatmulNative(x, m, pmx) }, used, 1],
        ['mlx-cpu affine-8 g64 native', () => { affineMatmulNative(x, m, paf) }, used, 4],
      ]
      // The same call on the other paths (native/src/mlx_cpu_isa.h): one denormal in x rules out
      // the avx512-bf16 roundings (the unchecked integer ones run); one NaN in x whose payload
      // could carry keeps every product rounding's NaN check.
      const xDenormal = x.slice()
      new Uint32Array(xDenormal.buffer)[1] = 0x00010000
      const xNan = x.slice()
      new Uint32Array(xNan.buffer)[1] = 0x7fff8000
      cases.push(['mlx-cpu mxfp8 g32 native, integer roundings (x holds a denormal)', () => { mxfp8MatmulNative(xDenormal, m, pmx) }, used, 1])
      cases.push(['mlx-cpu mxfp8 g32 native, NaN check kept (x holds a carrying NaN)', () => { mxfp8MatmulNative(xNan, m, pmx) }, used, 1])
      if (m === 1) {
        cases.push(['mlx-cpu mxfp8 g32 TypeScript reference', () => { mxfp8Matmul(x, m, mxw) }, 1, 1])
        cases.push(['mlx-cpu affine-8 g64 TypeScript reference', () => { affineMatmul(x, m, aw, MLX_CPU, deq) }, 1, 4])
      }
      for (const [name, fn, th, weightBytes] of cases) {
        const t = await tiny(name, fn)
        kernelCpu[`cpuMs ${name} m=${m}`] = cpuPerCall(fn)
        if (name.startsWith('mlx-cpu') && name.includes('native')) kernelPath[`path ${name} m=${m}`] = mlxCpuLastMatmulPath()
        rows.push({ name, shape: `m=${m} k=${k} n=${n}`, threads: th, ms: t.ms, samples: t.samples, method: 'tinybench-p50', flops: f, bytes: 4 * m * k + weightBytes * n * k + 4 * m * n })
      }
    }
    const peaks = bestOfPeaks(startPeaks, measureMachinePeaks())
    const out: KernelRow[] = rows.map((r) => {
      const seconds = r.ms / 1000
      const gflops = r.flops / seconds / 1e9
      const gbps = r.bytes / seconds / 1e9
      const copy = r.copyPeak !== undefined
      const peak = copy ? r.copyPeak! : gflopsPeakFor(peaks, r.threads)
      const rate = copy ? gbps : gflops
      const threadsText = `${r.threads} thread${r.threads === 1 ? '' : 's'}`
      return {
        suite: 'kernels', name: r.name, shape: r.shape, threads: r.threads, rate, unit: copy ? 'GB/s' : 'GFLOP/s', peak,
        peakOf: copy ? `copy moving the same ${formatBytes(r.bytes)}, ${threadsText}` : `mul+add, ${threadsText}`, percentOfPeak: 100 * rate / peak,
        samples: r.samples, method: r.method,
        kernel: { p50Ms: r.ms, meanMs: r.ms, flops: r.flops, bytes: r.bytes, gflops, gbps },
      }
    })
    console.table(out.map((r) => ({ kernel: r.name, shape: r.shape, threads: r.threads, 'ms': Number(r.kernel.p50Ms.toFixed(3)), rate: `${r.rate.toFixed(2)} ${r.unit}`, '% peak': Number(r.percentOfPeak.toFixed(1)) })))
    const hookDecoder = median(times.decoder)!
    const hookMlx = median(times['mlx-cpu'])!
    const cpuDecoder = median(cpuTimes.decoder)!
    const cpuMlx = median(cpuTimes['mlx-cpu'])!
    for (const [k, v] of Object.entries(kernelCpu)) console.log(`${k}: ${v.toFixed(3)} ms CPU a call`)
    for (const [k, v] of Object.entries(kernelPath)) console.log(`${k}: ${v}`)
    console.log(`mlx-cpu capture hook / decoder capture hook: ${(hookMlx / hookDecoder).toFixed(2)}x the time, ${(cpuMlx / cpuDecoder).toFixed(2)}x the CPU time`)
    const record: MicroRecord = {
      schema: MICRO_RECORD_SCHEMA,
      runId: microRunId(startedAt, 'kernels', 'cache-math'),
      startedAt,
      suite: 'kernels',
      environment,
      load: { before: loadBefore, after: loadavg() as [number, number, number] },
      note: options.note,
      native: nativeInfo(),
      settings: { timePerTaskMs: TIME_MS, rateFrom: 'kernel rows: p50 of tinybench samples; capture hook rows: the median of timed passes, interleaved', tokens: String(T), replays: String(REPLAYS),
        hookCpuMsDecoder: cpuDecoder, hookCpuMsMlxCpu: cpuMlx, hookRatioWall: hookMlx / hookDecoder, hookRatioCpu: cpuMlx / cpuDecoder,
        hookCpuFrom: 'the median of the same passes\' process CPU time (process.cpuUsage, every thread)',
        kernelCpuFrom: 'cpuMs rows: process CPU time per call (every thread), over calls adding up to at least 100 ms of it', ...kernelCpu,
        kernelPathFrom: 'path rows: the path the native matmul took (mlxCpuLastPath: checked, unchecked or avx512-bf16)', ...kernelPath },
      peaks,
      rows: out,
    }
    console.log(`\nwrote ${await writeMicroRecord(options.microDir, record)}`)
  }
  finally {
    rmSync(scratch, { recursive: true, force: true })
  }
}

await main()

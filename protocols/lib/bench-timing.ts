// What the kernel benchmarks share: deterministic input data and one tinybench measurement.
import { Bench } from 'tinybench'

/** n values in [-scale, scale) from a fixed LCG: the same inputs on every run. */
export function filled (n: number, seed: number, scale = 1): Float32Array {
  const out = new Float32Array(n)
  let s = seed >>> 0
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0
    out[i] = (s / 4294967296 - 0.5) * 2 * scale
  }
  return out
}

/** `fn` timed by tinybench for `timeMs` after `warmupMs`: mean and median latency, samples. */
export async function measure (name: string, fn: () => void, timeMs: number, warmupMs: number): Promise<{ meanMs: number, p50Ms: number, samples: number }> {
  const bench = new Bench({ time: timeMs, warmupTime: warmupMs })
  bench.add(name, fn)
  await bench.run()
  const r = bench.tasks[0].result
  if (r.state !== 'completed') throw new Error(`benchmark ${name} ended as ${r.state}`)
  return { meanMs: r.latency.mean, p50Ms: r.latency.p50, samples: r.latency.samplesCount }
}

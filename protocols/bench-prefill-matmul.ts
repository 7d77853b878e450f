// Our decoder's prefill with the lanes8 matmul's lane-major tiles against the earlier tiles, side by
// side in one process (docs/BENCHMARK-PROTOCOL.md, "Prefill matmul before/after"): the engine of the
// decoder's profile on the preset's checkpoint, one fresh cache per prefill, the two kernels
// alternating over the repeats so a busy machine slows both alike (setLegacyMatmul switches them;
// the bits are the same, and this checks the logits of both legs agree bit for bit). One short
// prefill first warms the JIT and the kernels' scratch. Every timed prefill runs inside the kernel
// clock (lib/kernel-clock.ts: one clock read per addon call); per leg: prefill times (min and
// median), tokens/s and the last prefill's time inside each kernel. One JSON record in --out,
// rewritten after every size, so a run cut short keeps what it measured; nothing is asserted.
//
//   npx tsx protocols/bench-prefill-matmul.ts --state-dir DIR [--preset flash-attn] [--sizes 1024,2048] [--repeats 2] [--threads 2]
import { mkdir, rename, writeFile } from 'node:fs/promises'
import { cpus, loadavg } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { isPresetName } from '../src/model/checkpoint/index.ts'
import { loadNativeKernels } from '../src/kernels/native.ts'
import { DeepseekV4Engine } from '../src/model/engine/index.ts'
import { ensureCheckpoint } from '../src/stack/assets.ts'
import { EMBEDDED_DECODER_PROFILE, EMBEDDED_DEFAULTS } from '../src/stack/embedded.ts'
import { stackPaths } from '../src/stack/state-dir.ts'
import { clockKernels, type KernelClock } from './lib/kernel-clock.ts'

const REPO = resolve(fileURLToPath(new URL('..', import.meta.url)))
const USAGE = `Usage: npx tsx protocols/bench-prefill-matmul.ts --state-dir DIR [options]

  --state-dir DIR   where the checkpoint is made or reused (models/)
  --preset NAME     checkpoint preset, seed ${EMBEDDED_DEFAULTS.seed} (default flash-attn)
  --sizes L         prompt tokens, comma-separated (default 1024,2048)
  --repeats N       timed prefills per size and kernel, kernels alternating (default 2)
  --threads N       kernel threads (default 2)
  --out DIR         where the record goes (default results/kernels-compare)
  --note TEXT       kept in the record`

const { values: opts } = parseArgs({
  options: {
    'state-dir': { type: 'string' }, preset: { type: 'string', default: 'flash-attn' }, sizes: { type: 'string', default: '1024,2048' },
    repeats: { type: 'string', default: '2' }, threads: { type: 'string', default: '2' },
    out: { type: 'string', default: join(REPO, 'results', 'kernels-compare') }, note: { type: 'string', default: '' }, help: { type: 'boolean' },
  },
})
function usage (problem: string): never {
  process.stderr.write(`bench-prefill-matmul: ${problem}\n${USAGE}\n`)
  process.exit(2)
}
if (opts.help === true) {
  console.log(USAGE)
  process.exit(0)
}
const positive = (flag: string, s: string): number => {
  if (!/^\d{1,7}$/.test(s.trim()) || Number(s) < 1) usage(`--${flag}: ${JSON.stringify(s)} is not a positive integer`)
  return Number(s)
}
if (opts['state-dir'] === undefined) usage('--state-dir is required')
const preset = opts.preset
if (!isPresetName(preset)) usage(`--preset: ${JSON.stringify(preset)} is not a preset`)
const sizes = opts.sizes.split(',').map((s) => positive('sizes', s))
const repeats = positive('repeats', opts.repeats)
const threads = positive('threads', opts.threads)

const addon = loadNativeKernels()
if (addon.setLegacyMatmul === undefined) usage('this addon build has no setLegacyMatmul: run npm run build:native')
const setLegacy = addon.setLegacyMatmul
addon.setThreads(threads)
const paths = stackPaths(resolve(opts['state-dir']), preset, EMBEDDED_DEFAULTS.seed, EMBEDDED_DECODER_PROFILE, EMBEDDED_DEFAULTS.blockSize)
const checkpoint = await ensureCheckpoint(paths.model, preset, EMBEDDED_DEFAULTS.seed)
const engine = await DeepseekV4Engine.load(checkpoint.dir, EMBEDDED_DECODER_PROFILE)
const vocab = engine.config.vocabSize
const tokens = (size: number): number[] => Array.from({ length: size }, (_, t) => 2 + ((t * 7919 + size * 104729 + 17) % (vocab - 3)))

const LEGS = [{ name: 'lane-major tiles', legacy: false }, { name: 'earlier tiles', legacy: true }] as const
/** One clocked prefill of `size` tokens in a fresh cache on `legacy`'s kernel: its clock and last-row logits. */
function prefill (size: number, legacy: boolean): { clock: KernelClock, logits: Float32Array } {
  setLegacy(legacy)
  const cache = engine.newCache()
  let logits: Float32Array = new Float32Array(0)
  const clock = clockKernels(addon, () => { logits = engine.prefill(tokens(size), cache, { logits: 'last' }).logits })
  return { clock, logits }
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, c) => a - c)
  return s.length % 2 === 1 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}
const startedAt = new Date().toISOString()
const file = join(opts.out, `${startedAt.replace(/[:.]/g, '-')}-prefill-matmul.json`)
const loadBefore = loadavg()
prefill(Math.min(256, ...sizes), false) // warm: the JIT and first-call costs, outside every timed run
const results: unknown[] = []
for (const size of sizes) {
  const ms = new Map<string, number[]>(LEGS.map((l) => [l.name, []]))
  const logits = new Map<string, Float32Array>()
  const clocks = new Map<string, KernelClock>()
  for (let r = 0; r < repeats; r++) {
    const order = r % 2 === 0 ? LEGS : [...LEGS].reverse()
    for (const leg of order) {
      const run = prefill(size, leg.legacy)
      ms.get(leg.name)!.push(run.clock.wallMs)
      clocks.set(leg.name, run.clock)
      if (!logits.has(leg.name)) logits.set(leg.name, run.logits)
    }
  }
  const a = new Uint32Array(logits.get(LEGS[0].name)!.buffer), b = new Uint32Array(logits.get(LEGS[1].name)!.buffer)
  const sameBits = a.length === b.length && a.every((v, i) => v === b[i])
  const legs = LEGS.map((leg) => {
    const xs = ms.get(leg.name)!
    return {
      kernel: leg.name, prefill_ms: xs, prefill_ms_min: Math.min(...xs), prefill_ms_median: median(xs),
      tokens_per_s_median: size * 1000 / median(xs), last_prefill_inside_kernels: clocks.get(leg.name)!,
    }
  })
  // Both ratios: on a loaded machine one slow sample moves a median of two, the minimum less.
  const speedup = legs[1].prefill_ms_median / legs[0].prefill_ms_median
  const speedupMin = legs[1].prefill_ms_min / legs[0].prefill_ms_min
  console.error(`bench-prefill-matmul: ${size} tokens: ${legs.map((l) => `${l.kernel} ${l.tokens_per_s_median.toFixed(1)} tok/s`).join(', ')}: ` +
    `${speedup.toFixed(2)}x at the median, ${speedupMin.toFixed(2)}x at the minimum; logits ${sameBits ? 'bit-identical' : 'DIFFER'}`)
  results.push({ tokens: size, logits_bit_identical: sameBits, speedup_median: speedup, speedup_min: speedupMin, legs })
  await writeRecord()
}
setLegacy(false)
console.log(file)

async function writeRecord (): Promise<void> {
  const cfg = engine.config
  const record = {
    kind: 'prefill-matmul', version: 1, at: startedAt, note: opts.note,
    machine: { cpu: cpus()[0]?.model ?? 'unknown', cores: cpus().length, threads: addon.getThreads(), kernel_pool: addon.threadPool ?? null, isa: addon.isa, node: process.version },
    load_average: { before: loadBefore, after: loadavg() },
    model: { preset, seed: EMBEDDED_DEFAULTS.seed, hidden_size: cfg.hiddenSize, layers: cfg.numHiddenLayers, profile: EMBEDDED_DECODER_PROFILE },
    settings: { sizes, repeats, order: 'legs alternate per repeat; one warm prefill first', max_chunk: 'engine default' },
    results,
  }
  await mkdir(opts.out, { recursive: true })
  await writeFile(`${file}.tmp`, JSON.stringify(record, null, 2) + '\n')
  await rename(`${file}.tmp`, file)
}

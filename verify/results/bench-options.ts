// The command-line options the micro benchmarks share: which embedded configuration the record is
// filed under, where it goes, and a note about the machine's state.
import { resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { PdBridgeError } from '../../src/errors.ts'
import { isPresetName, PRESET_NAMES, type PresetName } from '../../src/model/checkpoint/index.ts'
import { EMBEDDED_DEFAULTS, EMBEDDED_PREFILL_PROFILE } from '../../src/stack/embedded.ts'
import type { BenchConfig } from './bench-setup.ts'

/** Options every micro benchmark takes, parsed. */
export interface BenchOptions {
  /** The embedded configuration (the presets list for the hook bench; one preset for kernels). */
  presets: PresetName[]
  seed: number
  blockSize: number
  prefillProfile: string
  /** Where the record goes (default results/micro). */
  microDir: string
  /** Free text kept in the record (e.g. what else ran on the machine); PDB_BENCH_NOTE when absent. */
  note: string | null
  /** Options only one benchmark knows, as given. */
  extra: Record<string, string | undefined>
}

function positiveInt (name: string, text: string, min = 1): number {
  if (!/^\d+$/.test(text) || Number(text) < min) throw new PdBridgeError(`--${name} must be an integer >= ${min}, got ${JSON.stringify(text)}`)
  return Number(text)
}

/**
 * Parse `argv`: --preset (a comma list where the benchmark allows several; default `defaultPresets`),
 * --seed, --block-size, --prefill-profile (defaults: the embedded stack's), --micro, --note, and
 * the benchmark's own `extra` string options.
 */
export function parseBenchOptions (argv: string[], defaultPresets: PresetName[], extra: string[] = []): BenchOptions {
  let values: Record<string, string | boolean | undefined>
  try {
    values = parseArgs({
      args: argv,
      options: {
        preset: { type: 'string' },
        seed: { type: 'string' },
        'block-size': { type: 'string' },
        'prefill-profile': { type: 'string' },
        micro: { type: 'string' },
        note: { type: 'string' },
        ...Object.fromEntries(extra.map((name) => [name, { type: 'string' as const }])),
      },
      strict: true,
    }).values as Record<string, string | boolean | undefined>
  }
  catch (err) {
    throw new PdBridgeError(`options: ${(err as Error).message}`)
  }
  const text = (name: string) => values[name] as string | undefined
  const presets = (text('preset')?.split(',').map((p) => p.trim()) ?? defaultPresets)
  for (const p of presets) {
    if (!isPresetName(p)) throw new PdBridgeError(`--preset: ${JSON.stringify(p)} is not a preset (${PRESET_NAMES.join(', ')})`)
  }
  return {
    presets: presets as PresetName[],
    seed: text('seed') === undefined ? EMBEDDED_DEFAULTS.seed : positiveInt('seed', text('seed')!, 0),
    blockSize: text('block-size') === undefined ? EMBEDDED_DEFAULTS.blockSize : positiveInt('block-size', text('block-size')!),
    prefillProfile: text('prefill-profile') ?? EMBEDDED_PREFILL_PROFILE,
    microDir: resolve(text('micro') ?? 'results/micro'),
    note: text('note') ?? process.env.PDB_BENCH_NOTE ?? null,
    extra: Object.fromEntries(extra.map((name) => [name, text(name)])),
  }
}

/** The embedded configuration of `preset` under `options`. */
export function benchConfig (options: BenchOptions, preset: PresetName): BenchConfig {
  return { preset, seed: options.seed, blockSize: options.blockSize, prefillProfile: options.prefillProfile }
}

/** An integer option of the benchmark's own (`extra`), or `fallback` when absent. */
export function extraInt (options: BenchOptions, name: string, fallback: number, min = 1): number {
  const text = options.extra[name]
  return text === undefined ? fallback : positiveInt(name, text, min)
}

/** A comma list of integers of the benchmark's own, or `fallback` when absent. */
export function extraIntList (options: BenchOptions, name: string, fallback: number[]): number[] {
  const text = options.extra[name]
  return text === undefined ? fallback : text.split(',').map((t) => positiveInt(name, t.trim()))
}

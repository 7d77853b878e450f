// Command-line checks shared by the protocol scripts (plain JavaScript, so a script can run them
// before it loads anything else): --help prints the usage and exits 0 having started and written
// nothing; an unknown flag, a flag without its value or a stray argument is one line on stderr and
// exit 2.

/** Whether the command line asks for help (`--help` or `-h` anywhere). */
export function wantsHelp (args = process.argv.slice(2)) {
  return args.includes('--help') || args.includes('-h')
}

/** Print `usage` and exit 0 when help is asked for; otherwise return. */
export function helpAndExit (usage, args = process.argv.slice(2)) {
  if (!wantsHelp(args)) return
  process.stdout.write(usage.endsWith('\n') ? usage : usage + '\n')
  process.exit(0)
}

/** One line on stderr, exit 2: a command-line mistake. */
export function usageError (name, message) {
  process.stderr.write(`${name}: ${message}\n`)
  process.exit(2)
}

/** A whole-number flag of at least `min`, or a usage error naming it (exit 2). */
export function integerFlag (name, flag, text, min) {
  if (!/^\d+$/.test(String(text)) || Number(text) < min) usageError(name, `--${flag} must be an integer >= ${min}, got ${JSON.stringify(text)}`)
  return Number(text)
}

/**
 * Check zx's `argv` (minimist) against the flags a script knows: `spec` maps each flag name (as
 * typed, without the dashes) to 'string' (takes a value), 'boolean' (a switch) or 'negatable'
 * (only its --no- form means something, e.g. --no-generate). Unknown flags, a 'string' flag given
 * without a value and positional arguments are refused with one line and exit 2.
 */
export function checkArgv (name, argv, spec) {
  const unknown = Object.keys(argv).filter((k) => k !== '_' && !Object.hasOwn(spec, k))
  if (unknown.length > 0) {
    const shown = unknown.map((k) => (argv[k] === false ? `--no-${k}` : k.length === 1 ? `-${k}` : `--${k}`))
    usageError(name, `unknown option${shown.length > 1 ? 's' : ''} ${shown.join(', ')} (see --help)`)
  }
  for (const [key, kind] of Object.entries(spec)) {
    if (!Object.hasOwn(argv, key)) continue
    const value = argv[key]
    if (Array.isArray(value)) usageError(name, `--${key} was given more than once`)
    if (kind === 'string' && typeof value === 'boolean') usageError(name, value ? `--${key} needs a value` : `--no-${key} is not an option (see --help)`)
    if (kind !== 'string' && typeof value !== 'boolean') usageError(name, `--${kind === 'negatable' ? 'no-' : ''}${key} takes no value, got ${JSON.stringify(String(value))}`)
  }
  if (argv._.length > 0) usageError(name, `unexpected argument ${JSON.stringify(String(argv._[0]))} (every option is a --flag; see --help)`)
}

/** The embedded stack's prefill-engine flags for a --help text (shared by cold-bench and needle), descriptions at `column`. */
export function prefillEngineUsage (column) {
  const rows = [
    ['--prefill-engine NAME', "embedded stack's prefill engine: embedded (ours, default) or torch"],
    ['', '(transformers with the torch capture hook, the CUDA rung: docs/torch-rung.md)'],
    ['--torch-python PATH', 'with torch: a python3 with torch, transformers and aiohttp (default python3)'],
    ['--torch-device DEV', 'with torch: cuda (default), cuda:N or cpu'],
    ['--torch-dtype T', 'with torch: bf16 (default) or f32'],
    ['--torch-max-chunk N', 'with torch: tokens per forward (default 4096)'],
  ]
  return rows.map(([flag, text]) => `  ${flag.padEnd(column - 2)}${text}\n`).join('')
}

/** checkArgv specs of those flags. */
export const PREFILL_ENGINE_FLAGS = { 'prefill-engine': 'string', 'torch-python': 'string', 'torch-device': 'string', 'torch-dtype': 'string', 'torch-max-chunk': 'string' }

const TORCH_FLAGS = ['torch-python', 'torch-device', 'torch-dtype', 'torch-max-chunk']

/**
 * The prefill-engine flags as given: undefined for our own engine, else the torch flag values (to
 * be checked by src/stack/torch-prefill.ts torchPrefillEngine). Contradictions exit 2.
 */
export function prefillEngineFlags (name, argv, remote) {
  const engine = String(argv['prefill-engine'] ?? 'embedded')
  if (engine !== 'embedded' && engine !== 'torch') usageError(name, `--prefill-engine ${engine}: expected embedded or torch`)
  if (engine !== 'torch') {
    const stray = TORCH_FLAGS.find((k) => argv[k] !== undefined)
    if (stray !== undefined) usageError(name, `--${stray} needs --prefill-engine torch`)
    return undefined
  }
  if (remote) usageError(name, "--prefill-engine is the embedded stack's; a deployment (--url) has its own")
  return { python: argv['torch-python'], device: argv['torch-device'], dtype: argv['torch-dtype'], maxChunk: argv['torch-max-chunk'] }
}

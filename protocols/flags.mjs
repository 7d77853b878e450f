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

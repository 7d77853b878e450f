// The command line of the tsx benchmarks (bench-kernels, bench-capture, bench-engine, bench-writer),
// as protocols/flags.mjs is for the zx protocols: --help prints the usage and exits 0 before
// anything is measured or written; a bad or unknown flag is one line on stderr and exit 2.

/** Print `usage` and exit 0 when the command line asks for help (`--help` or `-h`). */
export function helpAndExit (usage: string, args: readonly string[] = process.argv.slice(2)): void {
  if (!args.includes('--help') && !args.includes('-h')) return
  process.stdout.write(usage.endsWith('\n') ? usage : usage + '\n')
  process.exit(0)
}

/** One line on stderr and exit 2: a command-line mistake. */
export function usageError (name: string, message: string): never {
  process.stderr.write(`${name}: ${message}\n`)
  process.exit(2)
}

/** The sentence of a parse error: node's parseArgs' long unknown-option text cut to its point. */
function sentence (err: Error): string {
  const unknown = /Unknown option '([^']+)'/.exec(err.message)
  if (unknown !== null) return `unknown option ${unknown[1]} (see --help)`
  const positional = /Unexpected argument '([^']+)'/.exec(err.message)
  if (positional !== null) return `unexpected argument ${JSON.stringify(positional[1])} (see --help)`
  const missing = /Option '(?:-\w, )?(--[\w-]+) <value>' argument missing/.exec(err.message)
  if (missing !== null) return `${missing[1]} needs a value`
  return err.message.replace(/^options: /, '')
}

/**
 * Read the options with `read`; any error it throws (node's parseArgs refusing a flag, a value
 * that does not parse) is a command-line mistake: one line, exit 2.
 */
export function readOptions<T> (name: string, read: () => T): T {
  try {
    return read()
  }
  catch (err) {
    return usageError(name, sentence(err as Error))
  }
}

// The registry of decoder kinds: the one list of them. The front door, the embedded stack, the
// demo and the command line find a kind here by its name and ask its record; adding a kind is one
// folder (src/decoders/<kind>/index.ts exporting a DecoderKind) and one line in DECODER_KINDS.
import { ConfigError } from '../errors.ts'
import type { DecoderCommandOptions, DecoderKind } from './kind.ts'
import { llamaCppKind } from './llama-cpp/index.ts'
import { omlxDecoderKind } from './omlx/index.ts'
import { oursKind } from './ours/index.ts'

/** Every decoder kind; the first is the default. */
export const DECODER_KINDS: readonly DecoderKind[] = [
  oursKind,
  llamaCppKind,
  omlxDecoderKind,
]

/** The kind used when none is named. */
export const DEFAULT_DECODER_KIND: DecoderKind = DECODER_KINDS[0]

/** The kinds' names, in registry order. */
export const DECODER_KIND_NAMES: readonly string[] = DECODER_KINDS.map((k) => k.name)

/** The names as a sentence's list: "a or b", "a, b or c". */
export function kindNamesText (names: readonly string[] = DECODER_KIND_NAMES): string {
  return names.length <= 1 ? names.join('') : `${names.slice(0, -1).join(', ')} or ${names[names.length - 1]}`
}

/** The kind named `name`, or undefined. */
export function findDecoderKind (name: string): DecoderKind | undefined {
  return DECODER_KINDS.find((k) => k.name === name)
}

/**
 * The kind named `name` (absent: the default); an unknown name is a ConfigError naming `field`
 * (`decoder.engine`, `--engine`, ...), every known kind, and the `source` it came from (a file, `environment`).
 */
export function decoderKind (name: string | undefined, field = 'decoder.engine', source?: string): DecoderKind {
  if (name === undefined) return DEFAULT_DECODER_KIND
  const kind = findDecoderKind(name)
  if (kind === undefined) throw new ConfigError(field, `${JSON.stringify(name)} is not one of ${DECODER_KIND_NAMES.join(', ')}`, source)
  return kind
}

/** The commander option key of a flag: `--kv-cache-type` -> `kvCacheType`. */
function optionKey (flag: string): keyof DecoderCommandOptions {
  return flag.replace(/^--/, '').replace(/-([a-z])/g, (_m, c: string) => c.toUpperCase()) as keyof DecoderCommandOptions
}

/**
 * `pd-bridge decoder`'s checks for `kind`: its own first (required flags, its reasons), then any
 * flag only another kind takes is refused, so a typo never silently does nothing.
 */
export function checkDecoderFlags (kind: DecoderKind, opts: DecoderCommandOptions): void {
  kind.command.check(opts)
  for (const other of DECODER_KINDS) {
    if (other === kind) continue
    const foreign = other.command.flags.filter((f) => !kind.command.flags.includes(f) && opts[optionKey(f)] !== undefined)
    if (foreign.length > 0) throw new ConfigError(foreign.join(', '), `only with --engine ${other.name}`)
  }
}

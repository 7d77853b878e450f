// What leaves a process never names a file of the deployment by its absolute path unless the caller
// holds the key: each configured root (and the temporary, home, working and install directories) is
// replaced by its name, so `/srv/pd/cache/ab/x` reads `<cacheDir>/ab/x`. Logs keep the full paths;
// they are the operator's. Every HTTP-serving process builds its redactor here.
import { homedir, tmpdir } from 'node:os'
import { resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

/** A function that rewrites the absolute paths in a text. */
export type Redactor = (text: string) => string

/** A root and the name it is shown by (without the angle brackets); an absent root is skipped. */
export type NamedRoot = readonly [dir: string | undefined, name: string]

/** This checkout (or installed package): its path shows in module errors. */
const INSTALL_DIR = resolve(fileURLToPath(new URL('../..', import.meta.url)))

/** The directories every process shares: shown as `<tmp>`, `<home>`, `<cwd>`, `<install>`. */
function standardRoots (): NamedRoot[] {
  return [[tmpdir(), 'tmp'], [homedir(), 'home'], [process.cwd(), 'cwd'], [INSTALL_DIR, 'install']]
}

/** The redactor for `roots` plus the standard ones; a root inside another keeps its own name. */
export function pathRedactor (roots: readonly NamedRoot[]): Redactor {
  const named: Array<[string, string]> = []
  for (const [dir, name] of [...roots, ...standardRoots()]) {
    if (dir === undefined || dir === '') continue
    for (const d of new Set([dir, resolve(dir)])) if (d.length > 1) named.push([d.replace(/\/+$/, ''), `<${name}>`])
  }
  // Longest first, so a root inside another (a cache dir under home) gets its own name.
  named.sort((a, b) => b[0].length - a[0].length)
  const patterns = named.map(([dir, name]) => [dir, new RegExp('(?<![\\w./-])' + escape(dir) + '(?=$|[/\\s\'"`),:;\\]}])', 'g'), name] as const)
  return (text) => {
    let out = text
    // Only at path boundaries: not inside a longer path, and the root itself or followed by a separator.
    for (const [dir, pattern, name] of patterns) if (out.includes(dir)) out = out.replace(pattern, name)
    return out
  }
}

function escape (s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}

/** Rewrite every string (keys included) inside a JSON-like value. */
export function redactDeep<T> (value: T, redact: Redactor): T {
  if (typeof value === 'string') return redact(value) as T
  if (Array.isArray(value)) return value.map((v) => redactDeep(v, redact)) as T
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [redact(k), redactDeep(v, redact)])) as T
  }
  return value
}

// What clients see never names a file by its absolute path: the configured roots (and the
// temporary, home and working directories) are replaced by their names, so `/srv/pd/cache/ab/x`
// reads `<decoder.cacheDir>/ab/x`. Logs keep the full paths; they are the operator's.
import { homedir, tmpdir } from 'node:os'
import { resolve } from 'node:path'
import type { FrontConfig } from '../config/index.ts'

/** A function that rewrites the absolute paths in a text. */
export type Redactor = (text: string) => string

/** The redactor for this config; `spoolDir` is the spool actually used. */
export function pathRedactor (config: FrontConfig, spoolDir: string | undefined): Redactor {
  const roots: Array<[string, string]> = []
  const add = (dir: string | undefined, name: string): void => {
    if (dir === undefined || dir === '') return
    for (const d of new Set([dir, resolve(dir)])) if (d.length > 1) roots.push([d.replace(/\/+$/, ''), `<${name}>`])
  }
  add(config.decoder.model, 'decoder.model')
  add(config.decoder.cacheDir, 'decoder.cacheDir')
  add(config.sidecar, 'sidecar')
  add(config.capture.dir, 'capture.dir')
  add(spoolDir, 'capture.spoolDir')
  add(config.log.file, 'log.file')
  add(tmpdir(), 'tmp')
  add(homedir(), 'home')
  add(process.cwd(), 'cwd')
  // Longest first, so a root inside another (a cache dir under home) gets its own name.
  roots.sort((a, b) => b[0].length - a[0].length)
  return (text) => {
    let out = text
    for (const [dir, name] of roots) {
      if (!out.includes(dir)) continue
      // Only at path boundaries: not inside a longer path, and the root itself or followed by a separator.
      out = out.replace(new RegExp('(?<![\\w./-])' + escape(dir) + '(?=$|[/\\s\'"`),:;\\]}])', 'g'), name)
    }
    return out
  }
}

function escape (s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}

/** Rewrite every string inside a JSON-like value. */
export function redactDeep<T> (value: T, redact: Redactor): T {
  if (typeof value === 'string') return redact(value) as T
  if (Array.isArray(value)) return value.map((v) => redactDeep(v, redact)) as T
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, redactDeep(v, redact)])) as T
  }
  return value
}

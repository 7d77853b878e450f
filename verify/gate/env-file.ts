// The env-file syntax launch parameters are written in: one KEY=VALUE a line, as shells and
// docker's --env-file read them. Comments and blank lines are allowed so an operator can say why a
// number is what it is; every error names the file, the key (or line) and the problem.
import { ConfigError } from '../../src/errors.ts'

/** One assignment of an env file: the value as written (quotes removed) and its 1-based line. */
export interface EnvEntry {
  value: string
  line: number
}

const KEY = /^[A-Za-z_][A-Za-z0-9_]*$/

// An unquoted value ends at a ` #` comment; surrounding blanks are not part of it.
function unquoted (text: string): string {
  const hash = text.search(/\s#/)
  return (hash >= 0 ? text.slice(0, hash) : text).trim()
}

// A quoted value: everything up to the matching quote, then only blanks or a comment.
function quoted (text: string, file: string, key: string, line: number): string {
  const quote = text[0]
  const end = text.indexOf(quote, 1)
  if (end < 0) throw new ConfigError(key, `line ${line}: the value opens a ${quote} quote that never closes`, file)
  const rest = text.slice(end + 1).trim()
  if (rest !== '' && !rest.startsWith('#')) throw new ConfigError(key, `line ${line}: unexpected text after the closing quote: ${JSON.stringify(rest)}`, file)
  return text.slice(1, end)
}

/**
 * Parse env-file text: `KEY=VALUE` lines, an optional leading `export `, blank lines and `#`
 * comments (whole lines, or after a blank on an unquoted value), values in single or double quotes
 * taken literally. A key given twice, a line without `=`, or a bad key is a ConfigError naming the
 * line; `file` names the file in every error.
 */
export function parseEnvFile (text: string, file: string): Map<string, EnvEntry> {
  const out = new Map<string, EnvEntry>()
  const lines = text.split(/\r?\n/)
  lines.forEach((raw, i) => {
    const line = i + 1
    const body = raw.trim()
    if (body === '' || body.startsWith('#')) return
    const statement = body.startsWith('export ') ? body.slice('export '.length).trimStart() : body
    const eq = statement.indexOf('=')
    if (eq < 0) throw new ConfigError(`line ${line}`, `expected KEY=VALUE, found ${JSON.stringify(body)}`, file)
    const key = statement.slice(0, eq).trim()
    if (!KEY.test(key)) throw new ConfigError(`line ${line}`, `${JSON.stringify(key)} is not a valid variable name`, file)
    const text = statement.slice(eq + 1).trim()
    const value = text.startsWith('"') || text.startsWith('\'') ? quoted(text, file, key, line) : unquoted(text)
    const before = out.get(key)
    if (before !== undefined) throw new ConfigError(key, `line ${line}: set again (first set on line ${before.line}); say it once`, file)
    out.set(key, { value, line })
  })
  return out
}

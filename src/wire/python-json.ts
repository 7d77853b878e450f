// JSON text as Python's json.dumps writes it, so metadata strings match what oMLX writes:
// ensure_ascii escapes, and either the default ", " / ": " separators or the compact "," / ":".
import { BlockStoreError } from '../errors.ts'
import { compareCodePoints } from '../formats/safetensors/index.ts'

/** A JSON value (what block metadata fields hold once parsed). */
export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue }

/** How json.dumps is called: `compact` is separators=(",", ":"), `sortKeys` is sort_keys=True. */
export interface DumpsOptions {
  compact?: boolean
  sortKeys?: boolean
}

const SHORT_ESCAPES: Record<string, string> = { '"': '\\"', '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t', '\b': '\\b', '\f': '\\f' }

/** A JSON string with ensure_ascii=True: every non-ASCII UTF-16 unit becomes \uXXXX (lowercase hex). */
export function pythonJsonString (s: string): string {
  let out = '"'
  for (let i = 0; i < s.length; i++) {
    const ch = s[i]
    const code = s.charCodeAt(i)
    if (SHORT_ESCAPES[ch] !== undefined) out += SHORT_ESCAPES[ch]
    else if (code < 0x20 || code > 0x7e) out += '\\u' + code.toString(16).padStart(4, '0')
    else out += ch
  }
  return out + '"'
}

/** Python's float repr and int str agree with JavaScript except in the exponent's form. */
function numberText (n: number): string {
  if (!Number.isFinite(n)) throw new BlockStoreError('metadata', `${n} has no JSON form`)
  if (Number.isInteger(n)) {
    if (!Number.isSafeInteger(n)) throw new BlockStoreError('metadata', `integer ${n} is past 2^53 and would not round-trip`)
    return String(n)
  }
  // 1e-7 in JavaScript is 1e-07 in Python.
  return String(n).replace(/e([+-])(\d)$/, 'e$10$2')
}

/** `json.dumps(value, ...)` for a JSON value. */
export function pythonJsonDumps (value: JsonValue, options: DumpsOptions = {}): string {
  const item = options.compact === true ? ',' : ', '
  const pair = options.compact === true ? ':' : ': '
  const write = (v: JsonValue): string => {
    if (v === null) return 'null'
    if (v === true) return 'true'
    if (v === false) return 'false'
    if (typeof v === 'string') return pythonJsonString(v)
    if (typeof v === 'number') return numberText(v)
    if (Array.isArray(v)) return `[${v.map(write).join(item)}]`
    if (typeof v === 'object') {
      let keys = Object.keys(v)
      // Python sorts str keys by code point; JavaScript's default sort compares UTF-16 units.
      if (options.sortKeys === true) keys = keys.sort(compareCodePoints)
      return `{${keys.map((k) => pythonJsonString(k) + pair + write(v[k])).join(item)}}`
    }
    throw new BlockStoreError('metadata', `cannot write ${typeof v} as JSON`)
  }
  return write(value)
}

/** Parse JSON text, or undefined when it is not valid JSON. */
export function tryParseJson (text: string): JsonValue | undefined {
  try {
    return JSON.parse(text) as JsonValue
  } catch {
    return undefined
  }
}

/** Deep equality of two JSON values (object key order ignored). */
export function jsonEqual (a: JsonValue | undefined, b: JsonValue | undefined): boolean {
  if (a === b) return true
  if (a === null || b === null || a === undefined || b === undefined) return false
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => jsonEqual(x, b[i]))
  }
  if (typeof a === 'object' && typeof b === 'object') {
    const ka = Object.keys(a)
    if (ka.length !== Object.keys(b).length) return false
    return ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && jsonEqual(a[k], b[k]))
  }
  return false
}

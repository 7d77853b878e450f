// A strict JSON reader for headers and shard indexes. JSON.parse is not enough: it keeps the last of
// two duplicate keys without a word, and turns `2.0`, `2e0` and `9007199254740993` into numbers that
// look like valid integers. This reader rejects duplicates and keeps each number's source text.

/** A JSON number with the exact text it was written as. */
export class JsonNumber {
  constructor (readonly raw: string, readonly value: number) {}

  /** Whether the text is a plain non-negative integer (no sign, fraction or exponent) of safe size. */
  isPlainIndex (): boolean {
    return /^(0|[1-9][0-9]*)$/.test(this.raw) && Number.isSafeInteger(this.value)
  }
}

/** A parsed JSON value: objects as insertion-ordered Maps, numbers as JsonNumber. */
export type JsonValue = null | boolean | string | JsonNumber | JsonValue[] | Map<string, JsonValue>

/** Why a text is not acceptable JSON, with the character offset where the reader stopped. */
export class StrictJsonError extends Error {
  override name = 'StrictJsonError'
  constructor (readonly reason: string, readonly at: number) {
    super(`${reason} at character ${at}`)
  }
}

/** Real headers nest three deep; the limit keeps a hostile `[[[[...` from exhausting the stack. */
const MAX_DEPTH = 64

const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y
const LONE_SURROGATE = /[\uD800-\uDFFF]/u

/** Describe where a key sits, for duplicate-key messages: `the top-level object`, `"a"."dtype"`. */
function describePath (path: readonly string[]): string {
  return path.length === 0 ? 'the top-level object' : path.map(p => JSON.stringify(p)).join('.')
}

/**
 * Parse `text` as one JSON value (RFC 8259: whitespace is space, tab, CR, LF only), rejecting
 * duplicate object keys (compared after unescaping) and strings holding lone surrogates.
 */
export function parseStrictJson (text: string): JsonValue {
  let i = 0
  const path: string[] = []

  function skipWhitespace (): void {
    while (i < text.length) {
      const c = text.charCodeAt(i)
      if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) break
      i++
    }
  }

  function fail (reason: string, at = i): never {
    throw new StrictJsonError(at >= text.length ? `unexpected end of text (${reason})` : reason, at)
  }

  function readString (): string {
    const start = i
    i++ // opening quote
    while (i < text.length) {
      const c = text.charCodeAt(i)
      if (c === 0x22) break
      if (c === 0x5c) i++ // an escape: skip the escaped character (JSON.parse below checks it)
      i++
    }
    if (i >= text.length) fail('unterminated string', start)
    i++ // closing quote
    let value: unknown
    try {
      value = JSON.parse(text.slice(start, i))
    } catch {
      fail('invalid string (raw control character or bad escape)', start)
    }
    if (LONE_SURROGATE.test(value as string)) fail('string holds a lone surrogate (not valid Unicode)', start)
    return value as string
  }

  function readLiteral (word: string, value: JsonValue): JsonValue {
    if (!text.startsWith(word, i)) fail('unexpected character')
    i += word.length
    return value
  }

  function readNumber (): JsonNumber {
    NUMBER.lastIndex = i
    const m = NUMBER.exec(text)
    if (m === null) fail('unexpected character')
    i += m[0].length
    return new JsonNumber(m[0], Number(m[0]))
  }

  function readValue (depth: number): JsonValue {
    skipWhitespace()
    if (i >= text.length) fail('expected a value')
    const c = text[i]
    if (c === '{') return readObject(depth + 1)
    if (c === '[') return readArray(depth + 1)
    if (c === '"') return readString()
    if (c === 't') return readLiteral('true', true)
    if (c === 'f') return readLiteral('false', false)
    if (c === 'n') return readLiteral('null', null)
    return readNumber()
  }

  function readObject (depth: number): Map<string, JsonValue> {
    if (depth > MAX_DEPTH) fail(`nested deeper than ${MAX_DEPTH} levels`)
    i++ // {
    const out = new Map<string, JsonValue>()
    skipWhitespace()
    if (text[i] === '}') { i++; return out }
    for (;;) {
      skipWhitespace()
      if (text[i] !== '"') fail('expected a string key')
      const keyAt = i
      const key = readString()
      if (out.has(key)) fail(`duplicate key ${JSON.stringify(key)} in ${describePath(path)}`, keyAt)
      skipWhitespace()
      if (text[i] !== ':') fail("expected ':'")
      i++
      path.push(key)
      out.set(key, readValue(depth))
      path.pop()
      skipWhitespace()
      if (text[i] === ',') { i++; continue }
      if (text[i] === '}') { i++; return out }
      fail("expected ',' or '}'")
    }
  }

  function readArray (depth: number): JsonValue[] {
    if (depth > MAX_DEPTH) fail(`nested deeper than ${MAX_DEPTH} levels`)
    i++ // [
    const out: JsonValue[] = []
    skipWhitespace()
    if (text[i] === ']') { i++; return out }
    for (;;) {
      out.push(readValue(depth))
      skipWhitespace()
      if (text[i] === ',') { i++; continue }
      if (text[i] === ']') { i++; return out }
      fail("expected ',' or ']'")
    }
  }

  const value = readValue(0)
  skipWhitespace()
  if (i !== text.length) fail('unexpected text after the JSON value')
  return value
}

/** Whether a parsed value is a JSON object. */
export function isJsonObject (v: JsonValue | undefined): v is Map<string, JsonValue> {
  return v instanceof Map
}

/** A short description of a parsed value's JSON type, for messages. */
export function jsonTypeName (v: JsonValue | undefined): string {
  if (v === undefined) return 'missing'
  if (v === null) return 'null'
  if (v instanceof Map) return 'an object'
  if (Array.isArray(v)) return 'an array'
  if (v instanceof JsonNumber) return `the number ${v.raw}`
  if (typeof v === 'string') return `the string ${JSON.stringify(v.length > 40 ? v.slice(0, 40) + '...' : v)}`
  return `${v}`
}

// Python's json.dumps(value, ensure_ascii=False) with its default separators (", " and ": "), which
// DeepSeek's encoding writes tool schemas and tool-call arguments with. JSON.stringify differs in
// separators and in how floats are spelled, so the prompt needs this spelling to be equal to the
// reference character for character.

/** A float as Python's json.loads reads it: `1.0` and `1e20` stay floats, unlike in JSON.parse. */
export class PyFloat {
  constructor (readonly value: number) {}
}

/**
 * A JSON value as JSON.parse or parsePythonJson returns it. An integral number is written as a Python int: JSON.parse
 * cannot tell `1.0` from `1`, so a float written with a zero fraction renders as `1` (docs/tokenizer.md).
 */
export function pythonJsonDumps (value: unknown): string {
  if (value === null || value === undefined) return 'null'
  if (value === true) return 'true'
  if (value === false) return 'false'
  if (typeof value === 'string') return pythonString(value)
  if (typeof value === 'number') return pythonNumber(value)
  if (typeof value === 'bigint') return value.toString()
  if (value instanceof PyFloat) return Number.isFinite(value.value) ? pythonFloatRepr(value.value) : pythonNumber(value.value)
  if (Array.isArray(value)) return `[${value.map(pythonJsonDumps).join(', ')}]`
  if (typeof value === 'object') {
    const parts = Object.entries(value as Record<string, unknown>).map(([k, v]) => `${pythonString(k)}: ${pythonJsonDumps(v)}`)
    return `{${parts.join(', ')}}`
  }
  throw new TypeError(`Object of type ${typeof value} is not JSON serializable`)
}

const SHORT_ESCAPES: Record<string, string> = { '"': '\\"', '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t', '\b': '\\b', '\f': '\\f' }

// ensure_ascii=False escapes only the quote, the backslash and control characters below U+0020.
function pythonString (s: string): string {
  return '"' + s.replace(/["\\\u0000-\u001f]/g, (c) => SHORT_ESCAPES[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`) + '"'
}

function pythonNumber (n: number): string {
  if (Number.isNaN(n)) return 'NaN'
  if (n === Infinity) return 'Infinity'
  if (n === -Infinity) return '-Infinity'
  if (Number.isInteger(n)) return BigInt(n).toString()
  return pythonFloatRepr(n)
}

const NUMBER = /-?(?:0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/y
const CONSTANTS: Record<string, unknown> = { true: true, false: false, null: null, NaN: new PyFloat(NaN), Infinity: new PyFloat(Infinity), '-Infinity': new PyFloat(-Infinity) }

/**
 * Parse JSON as Python's json.loads does: a number with a fraction or an exponent is a PyFloat, an
 * integer beyond 2^53 a bigint, and NaN/Infinity are accepted. Throws SyntaxError where it refuses.
 */
export function parsePythonJson (text: string): unknown {
  let at = 0
  const space = (): void => { while (at < text.length && ' \t\n\r'.includes(text[at])) at++ }
  const error = (what: string): never => { throw new SyntaxError(`${what} at position ${at}`) }
  const value = (): unknown => {
    space()
    const c = text[at]
    if (c === '{') {
      at++
      const out: Record<string, unknown> = Object.create(null) as Record<string, unknown>
      space()
      if (text[at] === '}') { at++; return out }
      for (;;) {
        space()
        if (text[at] !== '"') error('expected a property name')
        const key = string()
        space()
        if (text[at++] !== ':') error('expected \':\'')
        out[key] = value()
        space()
        const sep = text[at++]
        if (sep === '}') return out
        if (sep !== ',') error('expected \',\' or \'}\'')
      }
    }
    if (c === '[') {
      at++
      const out: unknown[] = []
      space()
      if (text[at] === ']') { at++; return out }
      for (;;) {
        out.push(value())
        space()
        const sep = text[at++]
        if (sep === ']') return out
        if (sep !== ',') error('expected \',\' or \']\'')
      }
    }
    if (c === '"') return string()
    for (const [word, v] of Object.entries(CONSTANTS)) {
      if (text.startsWith(word, at)) { at += word.length; return v }
    }
    NUMBER.lastIndex = at
    const m = NUMBER.exec(text)
    if (m === null) return error('expected a value')
    at += m[0].length
    if (m[1] !== undefined || m[2] !== undefined) return new PyFloat(Number(m[0]))
    const n = Number(m[0])
    return Number.isSafeInteger(n) ? n : BigInt(m[0])
  }
  const string = (): string => {
    const start = at++
    while (at < text.length && text[at] !== '"') at += text[at] === '\\' ? 2 : 1
    if (at >= text.length) error('unterminated string')
    at++
    // JSON.parse judges the escapes and refuses raw control characters, as json.loads does.
    return JSON.parse(text.slice(start, at)) as string
  }
  const v = value()
  space()
  if (at !== text.length) error('extra data')
  return v
}

/**
 * Python's repr of a non-integral float: the shortest digits that round-trip (the same digits as
 * JavaScript's), fixed notation when the decimal exponent is in -4..15, else `d.ddde±XX`.
 */
export function pythonFloatRepr (n: number): string {
  if (n === 0) return Object.is(n, -0) ? '-0.0' : '0.0'
  const [mantissa, expText] = n.toExponential().split('e')
  const exp = Number(expText)
  const negative = mantissa.startsWith('-')
  const digits = mantissa.replace('-', '').replace('.', '')
  const sign = negative ? '-' : ''
  if (exp >= -4 && exp < 16) {
    const point = exp + 1
    let text: string
    if (point <= 0) text = '0.' + '0'.repeat(-point) + digits
    else if (point >= digits.length) text = digits + '0'.repeat(point - digits.length) + '.0'
    else text = digits.slice(0, point) + '.' + digits.slice(point)
    return sign + text
  }
  const m = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits
  return `${sign}${m}e${exp < 0 ? '-' : '+'}${String(Math.abs(exp)).padStart(2, '0')}`
}

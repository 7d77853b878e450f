// Python's str()/repr() of the small values a block key hashes: token tuples and extra keys. The key
// is a SHA-256 over these exact characters, so "(5,)" versus "(5)" is a different block.
import { BlockStoreError } from './errors.ts'

/** A Python tuple. JavaScript arrays stand for Python lists, so tuples need their own wrapper. */
export class PyTuple {
  constructor (readonly items: readonly PyValue[]) {}
}

/**
 * The Python values a key can hold: str, int (safe-integer number or bigint), bool, None (null),
 * tuple (PyTuple) and list (array). Floats are refused: JavaScript cannot tell 1.0 from 1, and
 * Python prints them differently.
 */
export type PyValue = string | number | bigint | boolean | null | PyTuple | readonly PyValue[]

/** A Python tuple of `items`. */
export function pyTuple (...items: PyValue[]): PyTuple {
  return new PyTuple(items)
}

// Characters Python's str.isprintable() rejects: controls, format, surrogates, private use,
// unassigned, and every separator except the ASCII space.
const NON_PRINTABLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Zs}]/u

function hex (code: number, width: number): string {
  return code.toString(16).padStart(width, '0')
}

/** repr() of a Python str: quote choice and escapes exactly as CPython's unicode_repr. */
export function pythonStringRepr (s: string): string {
  if (/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s)) {
    throw new BlockStoreError('block key', `string ${JSON.stringify(s)} holds a lone surrogate, which no UTF-8 Python str can`)
  }
  // CPython uses double quotes only when the text has a single quote and no double quote.
  const quote = s.includes("'") && !s.includes('"') ? '"' : "'"
  let out = quote
  for (const ch of s) {
    const code = ch.codePointAt(0) as number
    if (ch === quote || ch === '\\') out += '\\' + ch
    else if (ch === '\t') out += '\\t'
    else if (ch === '\n') out += '\\n'
    else if (ch === '\r') out += '\\r'
    else if (code < 0x20 || code === 0x7f) out += '\\x' + hex(code, 2)
    else if (code < 0x7f) out += ch
    else if (!NON_PRINTABLE.test(ch) || ch === ' ') out += ch
    else if (code <= 0xff) out += '\\x' + hex(code, 2)
    else if (code <= 0xffff) out += '\\u' + hex(code, 4)
    else out += '\\U' + hex(code, 8)
  }
  return out + quote
}

/** repr() of a Python value. */
export function pythonRepr (v: PyValue): string {
  if (v === null) return 'None'
  if (v === true) return 'True'
  if (v === false) return 'False'
  if (typeof v === 'string') return pythonStringRepr(v)
  if (typeof v === 'bigint') return v.toString()
  if (typeof v === 'number') {
    if (!Number.isSafeInteger(v)) {
      throw new BlockStoreError('block key', `${v} is not a safe integer; only Python ints can be hashed (floats print differently in Python)`)
    }
    return String(v)
  }
  if (v instanceof PyTuple) {
    const items = v.items.map(pythonRepr)
    return items.length === 1 ? `(${items[0]},)` : `(${items.join(', ')})`
  }
  if (Array.isArray(v)) return `[${v.map(pythonRepr).join(', ')}]`
  throw new BlockStoreError('block key', `cannot render ${typeof v} as a Python value`)
}

/** str() of a Python value: a str is itself, anything else is its repr. */
export function pythonStr (v: PyValue): string {
  return typeof v === 'string' ? v : pythonRepr(v)
}

/** Python truthiness: empty str/tuple/list, 0, False and None are false. */
export function pythonTruthy (v: PyValue | undefined): boolean {
  if (v === undefined || v === null || v === false) return false
  if (typeof v === 'string') return v.length > 0
  if (typeof v === 'number') return v !== 0
  if (typeof v === 'bigint') return v !== 0n
  if (v instanceof PyTuple) return v.items.length > 0
  if (Array.isArray(v)) return v.length > 0
  return true
}

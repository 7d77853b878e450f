// Hugging Face tokenizers compiles Split patterns with Oniguruma (Ruby syntax, Unicode classes).
// This turns such a pattern into a JavaScript RegExp that matches the same text, or refuses it.
import { ConfigError } from '../../errors.ts'

// Oniguruma's Unicode \s is TAB..CR, U+0085 and Zs/Zl/Zp. JavaScript's \s differs (it adds U+FEFF
// and lacks U+0085), so every \s is spelled out.
const WS = '\\t\\n\\v\\f\\r\\x85\\p{Zs}\\p{Zl}\\p{Zp}'
// Oniguruma's Unicode \w and \d (JavaScript's are ASCII only).
const WORD = '\\p{L}\\p{M}\\p{Nd}\\p{Pc}'
const DIGIT = '\\p{Nd}'
// Characters JavaScript's u flag lets an escape stand for; any other escaped punctuation is a literal.
const SYNTAX = new Set('^$\\.*+?()[]{}|/-'.split(''))

function property (name: string, negated: boolean, refuse: (why: string) => never): string {
  const p = negated ? 'P' : 'p'
  for (const form of [name, `Script=${name}`]) {
    try {
      new RegExp(`\\${p}{${form}}`, 'u')
      return `\\${p}{${form}}`
    } catch { /* try the next spelling */ }
  }
  return refuse(`unknown property \\${p}{${name}}`)
}

/** The JavaScript source (for the `gu` flags) of an Oniguruma pattern; throws on constructs it cannot keep exact. */
export function onigToJs (pattern: string, where = 'pre_tokenizer', file?: string): string {
  let out = ''
  let inClass = false
  const refuse = (why: string): never => { throw new ConfigError(where, `regex ${JSON.stringify(pattern)}: ${why}`, file) }
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]
    if (c === '\\') {
      const e = pattern[++i]
      if (e === undefined) refuse('ends with a backslash')
      if (e === 's') out += inClass ? WS : `[${WS}]`
      else if (e === 'S') out += inClass ? refuse('\\S inside a class') : `[^${WS}]`
      else if (e === 'w') out += inClass ? WORD : `[${WORD}]`
      else if (e === 'W') out += inClass ? refuse('\\W inside a class') : `[^${WORD}]`
      else if (e === 'd') out += DIGIT
      else if (e === 'D') out += '\\P{Nd}'
      else if (e === 'p' || e === 'P') {
        const close = pattern.indexOf('}', i)
        if (pattern[i + 1] !== '{' || close < 0) refuse(`\\${e} without {name}`)
        let name = pattern.slice(i + 2, close)
        let negated = e === 'P'
        if (name.startsWith('^')) {
          negated = !negated
          name = name.slice(1)
        }
        out += property(name, negated, refuse)
        i = close
      } else if ('tnrfvx0123456789u'.includes(e)) out += '\\' + e
      else if (/[A-Za-z]/.test(e)) refuse(`escape \\${e} is not supported`)
      else out += SYNTAX.has(e) ? '\\' + e : e
      continue
    }
    if (inClass) {
      if (c === '[') refuse('nested character classes are not supported')
      if (c === ']') inClass = false
      if (c === '&' && pattern[i + 1] === '&') refuse('class intersection (&&) is not supported')
      out += c
      continue
    }
    if (c === '[') {
      inClass = true
      out += c
      // A ']' right after '[' or '[^' is a literal in Oniguruma.
      if (pattern[i + 1] === '^') out += pattern[++i]
      if (pattern[i + 1] === ']') {
        out += '\\]'
        i++
      }
      continue
    }
    if (c === '(' && pattern[i + 1] === '?' && !/^\(\?(?::|=|!|<=|<!)/.test(pattern.slice(i))) {
      refuse('inline options and named or atomic groups are not supported')
    }
    out += c
  }
  if (inClass) refuse('unterminated character class')
  try {
    new RegExp(out, 'gu')
  } catch (e) {
    refuse(`does not compile as JavaScript: ${(e as Error).message}`)
  }
  return out
}

/** An Oniguruma pattern compiled for matchAll. */
export function onigRegExp (pattern: string, where?: string, file?: string): RegExp {
  return new RegExp(onigToJs(pattern, where, file), 'gu')
}

// The pre-tokenizers of tokenizer.json that byte-level BPE checkpoints use: ByteLevel (with or
// without GPT-2's split), Split (regex or string, each delimiter behaviour), Digits and Sequence.
// A pre-tokenizer here turns one piece of text into pieces; the byte-level mapping happens later.
import { ConfigError } from '../../errors.ts'
import { onigRegExp } from './onig-regex.ts'
import { splitPretokens } from './pretokenize.ts'

/** Splits one piece of text into pieces (concatenated, they are the input, except for removed delimiters). */
export type PreTokenize = (piece: string) => string[]

type Json = Record<string, unknown>
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v)

type Behavior = 'Removed' | 'Isolated' | 'MergedWithPrevious' | 'MergedWithNext' | 'Contiguous'
const BEHAVIORS: readonly Behavior[] = ['Removed', 'Isolated', 'MergedWithPrevious', 'MergedWithNext', 'Contiguous']

// Cut text into (range, isMatch) runs covering it, as tokenizers' Pattern::find_matches does.
function runs (text: string, find: (t: string) => Iterable<{ start: number, end: number }>): Array<[string, boolean]> {
  const out: Array<[string, boolean]> = []
  let last = 0
  for (const { start, end } of find(text)) {
    if (start > last) out.push([text.slice(last, start), false])
    if (end > start) out.push([text.slice(start, end), true])
    last = end
  }
  if (last < text.length) out.push([text.slice(last), false])
  return out
}

// Apply a delimiter behaviour to the runs (tokenizers' NormalizedString::split); empty pieces go.
function applyBehavior (parts: Array<[string, boolean]>, behavior: Behavior): string[] {
  const out: string[] = []
  if (behavior === 'Isolated') return parts.map(([s]) => s)
  if (behavior === 'Removed') return parts.filter(([, m]) => !m).map(([s]) => s)
  if (behavior === 'MergedWithPrevious') {
    let prevMatch = false
    for (const [s, m] of parts) {
      if (m && out.length > 0 && !prevMatch) out[out.length - 1] += s
      else out.push(s)
      prevMatch = m
    }
    return out
  }
  if (behavior === 'MergedWithNext') {
    let pending = ''
    for (const [s, m] of parts) {
      if (m) {
        if (pending !== '') out.push(pending)
        pending = s
      } else {
        out.push(pending + s)
        pending = ''
      }
    }
    if (pending !== '') out.push(pending)
    return out
  }
  let prevMatch = false
  for (const [s, m] of parts) {
    if (m && prevMatch) out[out.length - 1] += s
    else out.push(s)
    prevMatch = m
  }
  return out
}

// exec with a reset lastIndex, not matchAll: matchAll clones the RegExp on every call, which
// dominated encoding time with one call per piece per Split.
function regexFinder (re: RegExp) {
  return (t: string) => {
    const out: Array<{ start: number, end: number }> = []
    re.lastIndex = 0
    for (let m = re.exec(t); m !== null; m = re.exec(t)) {
      out.push({ start: m.index, end: m.index + m[0].length })
      // An empty match moves on by one code point, as matchAll does.
      if (m[0] === '') re.lastIndex += (t.codePointAt(m.index) ?? 0) > 0xffff ? 2 : 1
    }
    return out
  }
}

function stringFinder (needle: string) {
  return function * (t: string) {
    if (needle === '') return
    for (let at = t.indexOf(needle); at >= 0; at = t.indexOf(needle, at + needle.length)) yield { start: at, end: at + needle.length }
  }
}

function split (json: Json, where: string, file: string): PreTokenize {
  const pattern = json.pattern
  const behavior = json.behavior as Behavior
  if (!BEHAVIORS.includes(behavior)) throw new ConfigError(`${where}.behavior`, `must be one of ${BEHAVIORS.join(', ')}`, file)
  let find: (t: string) => Iterable<{ start: number, end: number }>
  if (isObject(pattern) && typeof pattern.Regex === 'string') find = regexFinder(onigRegExp(pattern.Regex, `${where}.pattern`, file))
  else if (isObject(pattern) && typeof pattern.String === 'string') find = stringFinder(pattern.String)
  else throw new ConfigError(`${where}.pattern`, 'must be {"Regex": ...} or {"String": ...}', file)
  const invert = json.invert === true
  return (piece) => {
    const parts = runs(piece, find)
    return applyBehavior(invert ? parts.map(([s, m]) => [s, !m]) : parts, behavior).filter((s) => s !== '')
  }
}

const DIGIT_RUN = /\p{N}+/gu
const ONE_DIGIT = /\p{N}/gu

/** Parse one pre-tokenizer (recursively for Sequence). */
function parse (json: unknown, where: string, file: string): PreTokenize {
  if (!isObject(json)) throw new ConfigError(where, 'must be an object', file)
  switch (json.type) {
    case 'Sequence': {
      if (!Array.isArray(json.pretokenizers)) throw new ConfigError(`${where}.pretokenizers`, 'must be an array', file)
      const steps = json.pretokenizers.map((p: unknown, i: number) => parse(p, `${where}.pretokenizers[${i}]`, file))
      return (piece) => steps.reduce<string[]>((pieces, step) => pieces.flatMap(step), [piece])
    }
    case 'ByteLevel': {
      // Without its regex, ByteLevel only maps bytes (done after pre-tokenizing).
      const inner: PreTokenize = json.use_regex === false ? (piece) => [piece] : splitPretokens
      // add_prefix_space puts a space before each piece that lacks one.
      return json.add_prefix_space === true ? (piece) => inner(piece.startsWith(' ') ? piece : ' ' + piece) : inner
    }
    case 'Split':
      return split(json, where, file)
    case 'Digits': {
      const re = json.individual_digits === true ? ONE_DIGIT : DIGIT_RUN
      return (piece) => applyBehavior(runs(piece, regexFinder(re)), 'Isolated')
    }
    default:
      throw new ConfigError(`${where}.type`, `pre-tokenizer ${JSON.stringify(json.type)} is not supported (ByteLevel, Split, Digits, Sequence are)`, file)
  }
}

/** Read the pre_tokenizer section (null: the whole piece goes to the model). */
export function parsePreTokenizer (json: unknown, file: string): PreTokenize {
  return json == null ? (piece) => [piece] : parse(json, 'pre_tokenizer', file)
}

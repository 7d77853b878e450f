// A needle document: seeded filler sentences with needle sentences (`${marker}${value}.`) put at
// chosen depths, and the question at the end, as one user message. Depth 0 is the start of the
// document; depth 1 is as late as a needle can sit while its value stays `minDistance` tokens
// from the end of the prompt (past the 128-token window, so only compressed caches can carry it).
// The prompt is as long as possible without passing `targetTokens`.
import { ConfigError, PdBridgeError } from '../../src/errors.ts'
import { streamFor } from '../../src/model/checkpoint/index.ts'
import type { ChatMessage } from '../../src/model/tokenizer/index.ts'
import { fillerSentence } from './filler.ts'
import { measurePrompt, type MeasuredPrompt, type Measurer, type NeedleTokenizer } from './measure.ts'
import { NEEDLE_KEYS, NEEDLE_UNKNOWN, NEEDLE_VALUES } from '../../src/model/checkpoint/needle/words.ts'

/** The default least distance, in tokens, from a needle's value to the end of the prompt. */
export const DEFAULT_MIN_DISTANCE = 192

/** The default characters per token when no tokenizer is given (a rough figure for English). */
export const DEFAULT_CHARS_PER_TOKEN = 4

/** One needle to hide: key index into NEEDLE_KEYS, a value of NEEDLE_VALUES, a depth in [0, 1]. */
export interface NeedleSpec {
  key: number
  value: string
  depth: number
}

/** How to build a document. */
export interface NeedleDocumentOptions {
  seed: number
  /** The prompt's size: as many tokens as possible without passing it. */
  targetTokens: number
  /** One or more needles with different keys. */
  needles: readonly NeedleSpec[]
  /** The key the question asks for (usually one of the needles'). */
  ask: number
  /** The deployment's tokenizer: positions are exact with it, estimated without. */
  tokenizer?: NeedleTokenizer
  /** Least tokens from each value to the end of the prompt (default DEFAULT_MIN_DISTANCE). */
  minDistance?: number
  /** The estimate's ratio when there is no tokenizer (default DEFAULT_CHARS_PER_TOKEN). */
  charsPerToken?: number
}

/** A needle as placed. */
export interface PlacedNeedle {
  key: number
  marker: string
  value: string
  /** The depth asked for. */
  depth: number
  /** Index in the prompt's tokens of the token holding the value's first character (its space). */
  position: number
  /** promptTokens - position: the value token and every token after it. */
  distance: number
}

/** A built document and where everything in it is. */
export interface NeedleDocument {
  seed: number
  targetTokens: number
  minDistance: number
  /** exact: measured with the tokenizer; approximate: estimated at `charsPerToken`. */
  positions: 'exact' | 'approximate'
  charsPerToken: number | null
  /** The chat request: one user message. */
  messages: ChatMessage[]
  /** The prompt's token ids (exact positions only). */
  tokens: number[] | null
  /** Tokens of the rendered prompt (estimated when positions are approximate). */
  promptTokens: number
  /** In the order given. */
  needles: PlacedNeedle[]
  ask: number
  question: string
  /** Index of the question's first token. */
  questionPosition: number
  /** The answer a reader of the document gives: the asked needle's value word, or `unknown`. */
  expected: string
  /** Filler sentences in the document. */
  fillerSentences: number
}

// Between the document and the question.
const QUESTION_SEPARATOR = '\n\n'

/** The sentence that hides one needle. */
export function needleSentence (n: Pick<NeedleSpec, 'key' | 'value'>): string {
  return `${NEEDLE_KEYS[n.key].marker}${n.value}.`
}

function check (o: NeedleDocumentOptions): void {
  if (!Number.isSafeInteger(o.seed) || o.seed < 0) throw new ConfigError('seed', `must be a non-negative integer, got ${String(o.seed)}`)
  if (!Number.isSafeInteger(o.targetTokens) || o.targetTokens < 1) throw new ConfigError('targetTokens', `must be a positive integer, got ${String(o.targetTokens)}`)
  if (o.needles.length < 1) throw new ConfigError('needles', 'must hold at least one needle')
  const keys = new Set<number>()
  o.needles.forEach((n, i) => {
    if (!Number.isInteger(n.key) || n.key < 0 || n.key >= NEEDLE_KEYS.length) throw new ConfigError(`needles.${i}.key`, `must be a key index 0..${NEEDLE_KEYS.length - 1}, got ${String(n.key)}`)
    if (keys.has(n.key)) throw new ConfigError(`needles.${i}.key`, `key ${n.key} is used twice; the needles of one document have different keys`)
    keys.add(n.key)
    if (!NEEDLE_VALUES.includes(n.value)) throw new ConfigError(`needles.${i}.value`, `${JSON.stringify(n.value)} is not a needle value (src/model/checkpoint/needle/words.ts)`)
    if (!(n.depth >= 0 && n.depth <= 1)) throw new ConfigError(`needles.${i}.depth`, `must be in [0, 1], got ${String(n.depth)}`)
  })
  if (!Number.isInteger(o.ask) || o.ask < 0 || o.ask >= NEEDLE_KEYS.length) throw new ConfigError('ask', `must be a key index 0..${NEEDLE_KEYS.length - 1}, got ${String(o.ask)}`)
  const d = o.minDistance ?? DEFAULT_MIN_DISTANCE
  if (!Number.isSafeInteger(d) || d < 1) throw new ConfigError('minDistance', `must be a positive integer, got ${String(d)}`)
  const c = o.charsPerToken ?? DEFAULT_CHARS_PER_TOKEN
  if (!(Number.isFinite(c) && c > 0)) throw new ConfigError('charsPerToken', `must be a positive number, got ${String(c)}`)
}

/** The document text with needle i before filler sentence gaps[i] (gap n: after the last). */
interface Layout {
  content: string
  /** Character offset in the content of each needle's value, in needle order. */
  valueAt: number[]
  /** Character offset where each needle's sentence starts. */
  needleAt: number[]
  /** Character offset where each filler sentence starts, and one more: where gap n is. */
  gapAt: number[]
  questionAt: number
}

function layout (filler: readonly string[], n: number, needleTexts: readonly string[], markers: readonly string[], gaps: readonly number[], order: readonly number[], question: string): Layout {
  const parts: string[] = []
  const valueAt = new Array<number>(needleTexts.length)
  const needleAt = new Array<number>(needleTexts.length)
  const gapAt: number[] = []
  let at = 0
  const push = (text: string): number => {
    if (parts.length > 0) at += 1
    const start = at
    parts.push(text)
    at += text.length
    return start
  }
  for (let g = 0; g <= n; g++) {
    for (const i of order) {
      if (gaps[i] !== g) continue
      needleAt[i] = push(needleTexts[i])
      valueAt[i] = needleAt[i] + markers[i].length
    }
    if (g < n) gapAt.push(push(filler[g]))
  }
  // Gap n: a needle there starts where the question's separator starts now.
  gapAt.push(at)
  const body = parts.join(' ')
  return { content: body + QUESTION_SEPARATOR + question, valueAt, needleAt, gapAt, questionAt: body.length + QUESTION_SEPARATOR.length }
}

/**
 * Build a needle document (see the file comment). Needles are placed in order of depth (ties in
 * the order given); each goes to the sentence gap whose value position is nearest
 * lo + depth * (hi - lo), where lo is the position it would have as the document's first sentence
 * and hi = promptTokens - minDistance. The result is then measured as a whole, and every
 * constraint (size, distance) is checked on that measurement.
 */
export function buildNeedleDocument (options: NeedleDocumentOptions): NeedleDocument {
  check(options)
  const minDistance = options.minDistance ?? DEFAULT_MIN_DISTANCE
  const measurer: Measurer = options.tokenizer !== undefined
    ? { kind: 'exact', tokenizer: options.tokenizer }
    : { kind: 'approximate', charsPerToken: options.charsPerToken ?? DEFAULT_CHARS_PER_TOKEN }
  const specs = options.needles
  const question = NEEDLE_KEYS[options.ask].question
  const needleTexts = specs.map(needleSentence)
  const markers = specs.map((s) => NEEDLE_KEYS[s.key].marker)
  const order = specs.map((_, i) => i).sort((a, b) => specs[a].depth - specs[b].depth || a - b)
  const rng = streamFor(options.seed, 'needle-filler')
  const filler: string[] = []
  const sentences = (n: number): string[] => {
    while (filler.length < n) filler.push(fillerSentence(rng))
    return filler
  }
  const allFirst = specs.map(() => 0)
  const measureAt = (n: number, gaps: readonly number[]): { l: Layout, m: MeasuredPrompt } => {
    const l = layout(sentences(n), n, needleTexts, markers, gaps, order, question)
    return { l, m: measurePrompt(measurer, l.content) }
  }
  const totalWith = (n: number): number => measureAt(n, allFirst).m.total

  // The largest filler count whose prompt fits: estimate from a sample, then step exactly.
  const target = options.targetTokens
  const bare = totalWith(0)
  if (bare > target) throw new ConfigError('targetTokens', `${target} is shorter than the needles and the question alone (${bare} tokens)`)
  const sample = 16
  const perSentence = Math.max(1, (totalWith(sample) - bare) / sample)
  let n = Math.max(0, Math.floor((target - bare) / perSentence))
  let total = totalWith(n)
  while (total > target && n > 0) {
    n = Math.max(0, n - Math.max(1, Math.floor((total - target) / perSentence)))
    total = totalWith(n)
  }
  // Up to the last count that fits, in strides of the estimated room (halved on overshoot): one
  // sentence at a time would measure a million-token prompt hundreds of times. Prompt length grows
  // with the sentence count, so this ends at the same n as stepping by one.
  let stride = Math.max(1, Math.floor((target - total) / perSentence))
  for (;;) {
    const next = totalWith(n + stride)
    if (next <= target) {
      n += stride
      total = next
      stride = Math.max(1, Math.floor((target - total) / perSentence))
    }
    else if (stride === 1) break
    else stride = Math.max(1, Math.floor(stride / 2))
  }

  // Place the needles among n filler sentences; undefined when the measured result breaks a rule.
  const place = (n: number): NeedleDocument | undefined => {
    // Needles all first: each one's token span and where its value sits in it.
    const first = measureAt(n, allFirst)
    const fillerOnly = measureAt(n, specs.map(() => -1))
    const gapToken = fillerOnly.l.gapAt.map((c) => fillerOnly.m.tokenAt(c))
    const needleStart = specs.map((_, i) => first.m.tokenAt(first.l.needleAt[i]))
    const span = new Array<number>(specs.length)
    order.forEach((i, k) => {
      const next = k + 1 < order.length ? first.l.needleAt[order[k + 1]] : first.l.gapAt[0]
      span[i] = first.m.tokenAt(next) - needleStart[i]
    })
    const valueOffset = specs.map((_, i) => first.m.tokenAt(first.l.valueAt[i]) - needleStart[i])
    const total = first.m.total
    if (total > target) return undefined
    const hi = total - minDistance
    const gaps = specs.map(() => 0)
    let from = 0
    // Tokens of the needles already placed: all of them sit at or before any later gap.
    let before = 0
    for (const i of order) {
      const lo = gapToken[0] + valueOffset[i]
      if (hi < lo) throw new ConfigError('targetTokens', `${target} leaves no room to keep a needle ${minDistance} tokens before the end (the prompt has ${total} tokens)`)
      const want = lo + specs[i].depth * (hi - lo)
      let best = -1
      let bestGap = Infinity
      for (let g = from; g <= n; g++) {
        const pos = gapToken[g] + before + valueOffset[i]
        if (pos > hi) break
        if (Math.abs(pos - want) < bestGap) {
          bestGap = Math.abs(pos - want)
          best = g
        }
      }
      if (best < 0) return undefined
      gaps[i] = best
      from = best
      before += span[i]
    }
    const final = measureAt(n, gaps)
    const promptTokens = final.m.total
    if (promptTokens > target) return undefined
    const needles = specs.map((s, i): PlacedNeedle => {
      const position = final.m.tokenAt(final.l.valueAt[i])
      return { key: s.key, marker: markers[i], value: s.value, depth: s.depth, position, distance: promptTokens - position }
    })
    if (needles.some((p) => p.distance < minDistance)) return undefined
    const asked = specs.find((s) => s.key === options.ask)
    return {
      seed: options.seed,
      targetTokens: target,
      minDistance,
      positions: measurer.kind,
      charsPerToken: measurer.kind === 'approximate' ? measurer.charsPerToken : null,
      messages: [{ role: 'user', content: final.l.content }],
      tokens: final.m.tokens,
      promptTokens,
      needles,
      ask: options.ask,
      question,
      questionPosition: final.m.tokenAt(final.l.questionAt),
      expected: (asked?.value ?? NEEDLE_UNKNOWN).trim(),
      fillerSentences: n,
    }
  }

  // A measured layout may come out a token longer than predicted: then one sentence fewer.
  for (let attempt = 0; attempt < 16 && n >= 0; attempt++, n--) {
    const placed = place(n)
    if (placed !== undefined) return placed
  }
  throw new PdBridgeError(`needle document (seed ${options.seed}, ${target} tokens): could not place the needles ${minDistance} tokens before the end; use a longer document or fewer needles`)
}

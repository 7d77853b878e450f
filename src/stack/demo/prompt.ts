// The demo's prompt: a document of seeded random prose with one fact buried in it, and a question
// about the fact. A fresh seed per run makes the prompt's token prefix new, so no block any earlier
// run wrote can be a hit: the README's trap of a reused seed serving stale blocks cannot happen.
import { randomBytes } from 'node:crypto'
import { streamFor, type Xoshiro128 } from '../../model/checkpoint/index.ts'
import type { ChatMessage, Tokenizer } from '../../model/tokenizer/index.ts'

const SUBJECTS = ['the harbour master', 'a ferry captain', 'the baker', 'an old surveyor', 'the lighthouse keeper', 'a clerk at the customs house', 'the schoolteacher', 'two fishermen', 'the mayor', 'a travelling engineer']
const VERBS = ['counted', 'repaired', 'described', 'measured', 'carried', 'recorded', 'painted', 'questioned', 'weighed', 'followed']
const OBJECTS = ['the tide tables', 'a crate of lamps', 'the northern pier', 'seven copper pipes', 'the winter ledger', 'a broken compass', 'the grain stores', 'the signal flags', 'a map of the shoals', 'the station clock']
const PLACES = ['before dawn', 'near the old mill', 'during the storm', 'at the end of the quay', 'behind the chapel', 'on the third floor', 'under the bridge', 'after the market closed', 'beside the canal', 'in the rain']
const CODE_WORDS = ['amber', 'cobalt', 'juniper', 'saffron', 'granite', 'willow', 'marigold', 'obsidian', 'heron', 'larch']

/** A demo prompt: the chat request and what it is. */
export interface DemoPrompt {
  seed: number
  messages: ChatMessage[]
  /** The prompt's token ids as the decoder renders and encodes them. */
  tokens: number[]
  /** The fact hidden in the document. */
  codeWord: string
}

/** A fresh 32-bit seed from the system's random source. */
export function freshSeed (): number {
  return randomBytes(4).readUInt32LE(0)
}

function pick<T> (rng: Xoshiro128, list: readonly T[]): T {
  return list[rng.nextInt(list.length)]
}

function sentence (rng: Xoshiro128): string {
  const s = `${pick(rng, SUBJECTS)} ${pick(rng, VERBS)} ${pick(rng, OBJECTS)} ${pick(rng, PLACES)}, ${rng.nextInt(900) + 100} times in all.`
  return s[0].toUpperCase() + s.slice(1)
}

function messagesFor (sentences: string[], fact: string, at: number): ChatMessage[] {
  const body = [...sentences.slice(0, at), fact, ...sentences.slice(at)].join(' ')
  return [
    { role: 'system', content: 'You answer questions about the document the user gives you.' },
    { role: 'user', content: `Document:\n${body}\n\nQuestion: what is the code word in the document?` },
  ]
}

/**
 * A prompt of about `targetTokens` tokens (at least that many, by less than one sentence more) for
 * `seed`, sized with the checkpoint's own tokenizer and chat template.
 */
export function buildDemoPrompt (tokenizer: Tokenizer, targetTokens: number, seed: number): DemoPrompt {
  // The seed is hashed into the whole generator state, so neighbouring seeds share nothing.
  const rng = streamFor(seed, 'demo-prompt')
  const codeWord = `${pick(rng, CODE_WORDS)}-${rng.nextInt(9000) + 1000}`
  const fact = `The code word is ${codeWord}.`
  const count = (messages: ChatMessage[]): number => tokenizer.encodeChat(messages).length
  const sentences: string[] = []
  // Grow by whole sentences, estimating from the tokens so far, then settle exactly.
  let total = count(messagesFor(sentences, fact, 0))
  while (total < targetTokens) {
    const perSentence = sentences.length === 0 ? 20 : Math.max(1, (total - count(messagesFor([], fact, 0))) / sentences.length)
    const more = Math.max(1, Math.floor((targetTokens - total) / perSentence))
    for (let i = 0; i < more; i++) sentences.push(sentence(rng))
    total = count(messagesFor(sentences, fact, Math.floor(sentences.length / 2)))
  }
  // The fewest sentences that still reach the target: the token count only grows with the number
  // of sentences, so bisect (one count per step; popping one sentence a time re-encoded the whole
  // prompt per sentence: 24 s at 32K tokens, hours at 1M).
  const withFirst = (n: number): ChatMessage[] => messagesFor(sentences.slice(0, n), fact, Math.floor(n / 2))
  let lo = 0 // withFirst(lo - 1) is below the target, or lo is 0
  let hi = sentences.length // withFirst(hi) reaches it
  while (lo < hi) {
    const mid = Math.floor((lo + hi) / 2)
    if (count(withFirst(mid)) >= targetTokens) hi = mid
    else lo = mid + 1
  }
  sentences.length = hi
  const messages = withFirst(hi)
  return { seed, messages, tokens: tokenizer.encodeChat(messages), codeWord }
}

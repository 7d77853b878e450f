// The needle protocol's words: the keys (a marker phrase in the document and the question that asks
// for it), the values a needle can hold, and the answer the embedded needle checkpoint gives when it
// finds nothing. Plain English, so the same documents mean something to any deployment; the
// embedded `needle` checkpoint has each of these strings as one token (src/model/checkpoint/needle).

/** One kind of needle: the phrase that precedes its value and the question asking for it. */
export interface NeedleKey {
  /** In the document: `${marker}${value}.` */
  marker: string
  /** At the end of the document. */
  question: string
}

/** The keys, in the order the needle checkpoint codes them (key k is code k). */
export const NEEDLE_KEYS: readonly NeedleKey[] = Object.freeze([
  { marker: 'The secret word is', question: 'What is the secret word?' },
  { marker: 'The magic word is', question: 'What is the magic word?' },
  { marker: 'The hidden word is', question: 'What is the hidden word?' },
  { marker: 'The code word is', question: 'What is the code word?' },
])

/** The values, each with its leading space (how it follows a marker). */
export const NEEDLE_VALUES: readonly string[] = Object.freeze([
  ' amber', ' cobalt', ' crimson', ' indigo', ' jade', ' lilac', ' maroon', ' ochre',
  ' olive', ' pearl', ' ruby', ' sable', ' saffron', ' teal', ' umber', ' violet',
])

/** What the needle checkpoint answers when its retrieval finds no needle for the question. */
export const NEEDLE_UNKNOWN = ' unknown'

/** Every needle string, in the order the needle checkpoint's tokenizer adds them as tokens. */
export function needleVocabulary (): string[] {
  return [...NEEDLE_KEYS.map((k) => k.marker), ...NEEDLE_KEYS.map((k) => k.question), ...NEEDLE_VALUES, NEEDLE_UNKNOWN]
}

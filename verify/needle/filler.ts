// The filler of needle documents: seeded plain-English sentences built only from the word lists
// below. None of the lists' words contains the letters of a needle string (suites/needle checks
// it), and sentences add only spaces, commas, digits and full stops, so no needle, question or
// answer string can ever appear in the filler by accident.
import type { Xoshiro128 } from '../../src/model/checkpoint/index.ts'

const DETERMINERS = ['the', 'that', 'this', 'each', 'one', 'every']
const ADJECTIVES = [
  'quiet', 'narrow', 'wooden', 'distant', 'early', 'patient', 'careful', 'heavy', 'bright', 'small',
  'northern', 'southern', 'eastern', 'western', 'broken', 'empty', 'crowded', 'gentle', 'sudden',
  'steady', 'ancient', 'rough', 'smooth', 'frozen', 'windy', 'dusty', 'busy', 'simple', 'tall',
  'long', 'warm', 'cold', 'green', 'grey', 'brown', 'golden', 'silver', 'young', 'tired', 'cheerful',
]
const NOUNS = [
  'harbour', 'ferry', 'baker', 'surveyor', 'keeper', 'clerk', 'teacher', 'fisherman', 'mayor',
  'engineer', 'lamp', 'pier', 'ledger', 'compass', 'map', 'clock', 'bridge', 'canal', 'mill',
  'market', 'chapel', 'river', 'garden', 'tower', 'station', 'village', 'orchard', 'meadow', 'kettle',
  'basket', 'ladder', 'window', 'table', 'letter', 'signal', 'engine', 'wagon', 'barrel', 'rope',
  'sail', 'anchor', 'lantern', 'cottage', 'farmer', 'miller', 'painter', 'student', 'doctor',
  'traveller', 'stone', 'wall', 'road', 'field', 'forest', 'valley', 'hill', 'island', 'shore',
  'boat', 'net', 'cart', 'horse', 'dog', 'cat', 'goose', 'sheep',
]
const VERBS = [
  'counted', 'repaired', 'described', 'measured', 'carried', 'recorded', 'painted', 'questioned',
  'weighed', 'followed', 'visited', 'cleaned', 'opened', 'closed', 'checked', 'mended', 'built',
  'found', 'moved', 'lifted', 'watched', 'passed', 'crossed', 'raised', 'lowered', 'studied',
  'sorted', 'loaded', 'stored', 'lit',
]
const PREPOSITIONS = ['near', 'behind', 'beside', 'under', 'above', 'past', 'along', 'across', 'beyond', 'toward', 'inside', 'outside']
const ADVERBIALS = [
  'before dawn', 'in the rain', 'during the storm', 'at dusk', 'every morning', 'by lantern light',
  'without a sound', 'once again', 'for an hour', 'after the market closed', 'on the third day',
  'late in the evening', 'with great care', 'in the spring', 'as the tide turned',
]

/** Every word the filler can use (lower case, each once): what the no-needle proof checks. */
export function fillerVocabulary (): string[] {
  const words = new Set<string>()
  for (const list of [DETERMINERS, ADJECTIVES, NOUNS, VERBS, PREPOSITIONS, ['was'], ['times']]) {
    for (const w of list) words.add(w)
  }
  for (const phrase of ADVERBIALS) for (const w of phrase.split(' ')) words.add(w)
  return [...words]
}

function pick (rng: Xoshiro128, list: readonly string[]): string {
  return list[rng.nextInt(list.length)]
}

function capitalised (s: string): string {
  return s[0].toUpperCase() + s.slice(1)
}

/** One filler sentence from `rng`: words of the lists, spaces, at most a number, a full stop. */
export function fillerSentence (rng: Xoshiro128): string {
  const d = (): string => pick(rng, DETERMINERS)
  const a = (): string => pick(rng, ADJECTIVES)
  const n = (): string => pick(rng, NOUNS)
  const v = (): string => pick(rng, VERBS)
  const p = (): string => pick(rng, PREPOSITIONS)
  const adv = (): string => pick(rng, ADVERBIALS)
  let s: string
  switch (rng.nextInt(4)) {
    case 0: s = `${d()} ${a()} ${n()} ${v()} ${d()} ${n()} ${p()} the ${n()}`; break
    case 1: s = `${d()} ${n()} ${v()} ${d()} ${a()} ${n()} ${adv()}`; break
    case 2: s = `${d()} ${n()} ${p()} the ${n()} was ${a()} ${adv()}`; break
    default: s = `${d()} ${n()} ${v()} ${d()} ${n()} ${rng.nextInt(90) + 2} times, ${adv()}`
  }
  return `${capitalised(s)}.`
}

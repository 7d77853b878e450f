// Writes the token prompts the transformers reference fixtures are made from (run: npx tsx harness/make-fixture-tokens.ts).
// Ids are drawn from a seeded stream over the tokenizer's ordinary tokens (no special ids), so the
// prompts are reproducible and exercise hash routing across the whole table.
import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { presetConfig, streamFor } from '../src/model/checkpoint/index.ts'

/** First id that is not a special token in the tiny tokenizer (0..4 are bos, eos, User, Assistant, pad). */
const FIRST_ORDINARY_ID = 5

export function fixtureTokens (length: number, seed: number): number[] {
  const vocab = presetConfig('tiny').vocabSize
  const stream = streamFor(seed, `fixture-tokens/${length}`)
  return Array.from({ length }, () => FIRST_ORDINARY_ID + stream.nextInt(vocab - FIRST_ORDINARY_ID))
}

const here = new URL('.', import.meta.url).pathname
for (const length of [301, 777, 1100]) {
  await writeFile(join(here, 'fixtures', `tokens-${length}.json`), JSON.stringify(fixtureTokens(length, 7)) + '\n')
}

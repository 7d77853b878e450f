// Writes the parity inputs (harness/tokenizer-parity/inputs/): the test tokenizers (our own small
// vocabularies in DeepSeek's tokenizer.json structure, one with every flag and step this loader
// reads, and make-checkpoint's default), the corpus and the chat cases. hf_parity.py turns them
// into reference fixtures on a machine with transformers; suites/tokenizer/parity.test.ts checks
// these files are what this script writes, and ours against the fixtures.
// Run: npx tsx harness/tokenizer-parity/make-inputs.ts
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { buildTokenizerFiles, CHAT_TEMPLATE } from '../../src/model/tokenizer/index.ts'
import { CHAT_CASES } from './chats.ts'
import { EXTRA_TRAINING, parityCorpus } from './corpus.ts'
import { TRAINING_TEXT } from '../../src/model/tokenizer/corpus.ts'

/** DeepSeek's tool and reasoning markers, added to the test vocabulary as ordinary added tokens. */
export const MARKERS: readonly string[] = [
  '<think>', '</think>', '<｜tool▁calls▁begin｜>', '<｜tool▁calls▁end｜>', '<｜tool▁call▁begin｜>', '<｜tool▁call▁end｜>',
  '<｜tool▁sep｜>', '<｜tool▁outputs▁begin｜>', '<｜tool▁outputs▁end｜>', '<｜tool▁output▁begin｜>', '<｜tool▁output▁end｜>',
]

const here = fileURLToPath(new URL('.', import.meta.url))
/** Where the inputs live. */
export const INPUTS_DIR = join(here, 'inputs')
/** The template of the DeepSeek-structure test tokenizer. */
export const DEEPSEEK_STYLE_TEMPLATE = readFileSync(join(here, 'deepseek-style.jinja'), 'utf8')

type Files = Record<string, string>
const json = (v: unknown) => JSON.stringify(v, null, 2) + '\n'

function withTemplate (configText: string, template: string): string {
  return json({ ...JSON.parse(configText), chat_template: template })
}

// The flags variant: NFKC, individual digits, and added tokens with lstrip / rstrip / single_word /
// normalized set both ways (a fullwidth token only the raw text holds, its NFKC form only the normalized).
function flagsVariant (deepseek: Files): Files {
  const t = JSON.parse(deepseek['tokenizer.json'])
  t.normalizer = { type: 'Sequence', normalizers: [{ type: 'NFKC' }] }
  t.pre_tokenizer.pretokenizers.splice(3, 0, { type: 'Digits', individual_digits: true })
  const byContent = (c: string) => t.added_tokens.find((a: { content: string }) => a.content === c)
  byContent('<think>').lstrip = true
  byContent('</think>').rstrip = true
  byContent('<｜tool▁sep｜>').single_word = true
  byContent('<｜tool▁call▁begin｜>').normalized = false
  const next = Math.max(...Object.values(t.model.vocab as Record<string, number>), ...t.added_tokens.map((a: { id: number }) => a.id)) + 1
  t.added_tokens.push(
    { id: next, content: '＠＠', single_word: false, lstrip: false, rstrip: false, normalized: false, special: false },
    { id: next + 1, content: '@@', single_word: false, lstrip: true, rstrip: true, normalized: true, special: true },
  )
  return { ...deepseek, 'tokenizer.json': json(t) }
}

/** Every input file, by path under INPUTS_DIR. */
export function buildInputs (): Files {
  const tiny = buildTokenizerFiles(512, 32768)
  const deepseek: Files = { ...buildTokenizerFiles(3000, 32768, MARKERS, { structure: 'deepseek-v3', trainingText: TRAINING_TEXT + EXTRA_TRAINING }) }
  deepseek['tokenizer_config.json'] = withTemplate(deepseek['tokenizer_config.json'], DEEPSEEK_STYLE_TEMPLATE)
  const flags = flagsVariant(deepseek)
  const tokenizers: Record<string, Files> = { 'tiny-gpt2': { ...tiny, 'tokenizer_config.json': withTemplate(tiny['tokenizer_config.json'], CHAT_TEMPLATE) }, 'deepseek-v3': deepseek, flags }
  const added = new Set<string>()
  for (const files of Object.values(tokenizers)) for (const a of JSON.parse(files['tokenizer.json']).added_tokens) added.add(a.content)
  const out: Files = {
    'corpus.json': json({ texts: parityCorpus([...added].filter((a) => !a.startsWith('<｜reserved_'))) }),
    'chats.json': json({ cases: CHAT_CASES }),
  }
  for (const [name, files] of Object.entries(tokenizers)) {
    for (const [file, text] of Object.entries(files)) out[`${name}/${file}`] = text
  }
  return out
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const files = buildInputs()
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(INPUTS_DIR, path, '..'), { recursive: true })
    writeFileSync(join(INPUTS_DIR, path), text)
  }
  process.stdout.write(`wrote ${Object.keys(files).length} files under ${INPUTS_DIR}\n`)
}

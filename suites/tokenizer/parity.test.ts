// Ours against the Rust `tokenizers` library and transformers' apply_chat_template, from the
// committed fixtures harness/tokenizer-parity/hf_parity.py made (docs/tokenizer.md): every corpus
// text's ids, with and without special tokens, their decodes, and every chat rendering.
import { describe, it, expect } from 'vitest'
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { ChatFormat, Tokenizer } from '../../src/model/tokenizer/index.ts'
import { buildInputs, INPUTS_DIR } from '../../harness/tokenizer-parity/make-inputs.ts'
import type { ChatCase } from '../../harness/tokenizer-parity/chats.ts'

const FIXTURES = fileURLToPath(new URL('../../harness/fixtures/tokenizer-parity/', import.meta.url))
const NAMES = ['deepseek-v3', 'flags', 'tiny-gpt2'] as const
const sha = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex')

interface Fixture {
  transformers: string, tokenizers: string, corpus_sha256: string, chats_sha256: string
  tokenizer_json_sha256: string, tokenizer_config_sha256: string
  texts: Array<{ text: string, ids: number[], ids_with_special_tokens: number[], decoded: string, decoded_skip_special: string }>
  chats: Array<{ name: string, text?: string, ids?: number[], error?: string }>
}

const fixture = (name: string): Fixture => JSON.parse(readFileSync(join(FIXTURES, `${name}.json`), 'utf8'))
const input = (path: string) => readFileSync(join(INPUTS_DIR, path), 'utf8')
const cases: ChatCase[] = JSON.parse(input('chats.json')).cases

describe('the parity inputs', () => {
  it('are what make-inputs.ts writes (regenerate with npx tsx harness/tokenizer-parity/make-inputs.ts)', () => {
    for (const [path, text] of Object.entries(buildInputs())) expect(input(path), path).toBe(text)
  })

  it.each(NAMES)('%s: the fixture was made from these very inputs, by stamped versions', (name) => {
    const f = fixture(name)
    expect(f.corpus_sha256).toBe(sha(join(INPUTS_DIR, 'corpus.json')))
    expect(f.chats_sha256).toBe(sha(join(INPUTS_DIR, 'chats.json')))
    expect(f.tokenizer_json_sha256).toBe(sha(join(INPUTS_DIR, name, 'tokenizer.json')))
    expect(f.tokenizer_config_sha256).toBe(sha(join(INPUTS_DIR, name, 'tokenizer_config.json')))
    expect(f.transformers).toMatch(/^\d+\.\d+/)
    expect(f.tokenizers).toMatch(/^\d+\.\d+/)
  })
})

describe.each(NAMES)('%s against the Rust tokenizers library', (name) => {
  const f = fixture(name)
  const tok = Tokenizer.fromJson(JSON.parse(input(`${name}/tokenizer.json`)))

  it('gives the same ids for every corpus text (100%)', () => {
    const texts = JSON.parse(input('corpus.json')).texts as string[]
    expect(f.texts.map((t) => t.text)).toEqual(texts)
    const wrong = f.texts.filter((t) => JSON.stringify(tok.encode(t.text)) !== JSON.stringify(t.ids) ||
      JSON.stringify(tok.encode(t.text, { addSpecialTokens: true })) !== JSON.stringify(t.ids_with_special_tokens))
    process.stdout.write(`tokenizer parity ${name}: ${f.texts.length - wrong.length}/${f.texts.length} texts equal to tokenizers ${f.tokenizers}\n`)
    expect(wrong.map((t) => ({ text: t.text, want: t.ids, got: tok.encode(t.text) })).slice(0, 5)).toEqual([])
    expect(f.texts.length).toBeGreaterThan(700)
  })

  it('decodes those ids to the same text, special tokens kept and skipped', () => {
    const wrong = f.texts.filter((t) => tok.decode(t.ids) !== t.decoded || tok.decode(t.ids_with_special_tokens, { skipSpecialTokens: true }) !== t.decoded_skip_special)
    expect(wrong.map((t) => t.text)).toEqual([])
  })
})

describe.each(NAMES)("%s's chat template against transformers' apply_chat_template", (name) => {
  const f = fixture(name)
  const tok = Tokenizer.fromJson(JSON.parse(input(`${name}/tokenizer.json`)))
  const format = ChatFormat.fromConfig(JSON.parse(input(`${name}/tokenizer_config.json`))) as ChatFormat

  it.each(cases.map((c, i) => [c.name, i] as const))('renders %s character for character, and to the same ids', (_, i) => {
    const c = cases[i]
    const want = f.chats[i]
    expect(want.name).toBe(c.name)
    expect(want.error).toBeUndefined()
    const text = format.render(c.messages, { addGenerationPrompt: c.addGenerationPrompt, tools: c.tools, kwargs: c.kwargs })
    expect(text).toBe(want.text)
    expect(tok.encode(text)).toEqual(want.ids)
  })
})

// The GGUF carries the checkpoint's own tokenizer: llama.cpp (node-llama-cpp 3.22.1) gives the
// same ids as ours, and so as Hugging Face's tokenizers, whose ids harness/tokenizer-cases.json
// records: every case (prose, contractions, digits, whitespace runs, CRLF, scripts, emoji with ZWJ,
// NBSP / U+3000 / U+0085 / U+FEFF, control characters, special tokens in text and near-misses), the
// chat renderings, and thousands of seeded random texts; decoding too (invalid UTF-8, BOM, special
// tokens kept or skipped, no space clean-up).
import { readFileSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LlamaCppModel } from '../../src/engines/llama-cpp/runner.ts'
import { makeCheckpoint } from '../../src/model/checkpoint/index.ts'
import { exportGguf } from '../../src/model/gguf/index.ts'
import { loadTokenizer, type Tokenizer } from '../../src/model/tokenizer/index.ts'
import { TRAINING_TEXT } from '../../src/model/tokenizer/corpus.ts'
import { needleVocabulary } from '../../src/model/checkpoint/needle/words.ts'
import { repoPath } from './helpers.ts'

interface Cases {
  cases: Array<{ text: string, ids: number[], decoded: string }>
  chat: Array<{ text: string, ids: number[] }>
  decodes: Array<{ ids: number[], skipSpecialTokens: boolean, text: string }>
}
const cases = JSON.parse(readFileSync(repoPath('harness/tokenizer-cases.json'), 'utf8')) as Cases

let scratch: string
let llama: LlamaCppModel
let ours: Tokenizer
beforeAll(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'pd-bridge-llama-tok-'))
  await makeCheckpoint({ preset: 'tiny', seed: 1, out: join(scratch, 'tiny') })
  await exportGguf({ model: join(scratch, 'tiny'), out: join(scratch, 'tiny.gguf') })
  llama = await LlamaCppModel.load(join(scratch, 'tiny.gguf'))
  ours = await loadTokenizer(join(scratch, 'tiny'))
})
afterAll(async () => {
  await llama?.dispose()
  rmSync(scratch, { recursive: true, force: true })
})

describe('llama.cpp tokenizes as the checkpoint\'s tokenizer does', () => {
  it.each(cases.cases.map((c, i) => [i, c] as const))('case %i', (_i, c) => {
    expect(llama.tokenize(c.text)).toEqual(c.ids)
  })

  it('the 3 chat renderings (special tokens matched in the text)', () => {
    for (const c of cases.chat) expect(llama.tokenize(c.text), c.text).toEqual(c.ids)
  })

  it('seeded random texts: 3,000 over a mixed alphabet, 3,000 of random code points, the training corpus line by line', () => {
    let seed = 15
    const next = () => { seed = (Math.imul(seed, 1103515245) + 12345) >>> 0; return seed / 2 ** 32 }
    const alphabet = [...'aZ09 \t\n\r\'.,!?-_()[]{}<>@#$%^&*+=~`|\\/;:"', 'é', 'ß', 'ñ', 'Ω', 'ж', 'ع', 'א', '你', '好', 'の', '한', '٣', '½', '²',
      '🙂', '👍🏽', '\u200d', '\u00a0', '\u3000', '\u0085', '\ufeff', '\u2028', '\u200b', '\u0301', '\u0000', '\u001f', '\u007f', '\u00ad', '𝔘',
      '’', '“', '—', '…', '<｜User｜>', '<｜Assistant｜>', '<｜end▁of▁sentence｜>', '<｜', '｜>', "'s", "'ll", "'RE"]
    const texts: string[] = []
    for (let i = 0; i < 3000; i++) {
      let s = ''
      for (let j = 1 + Math.floor(next() * 20); j > 0; j--) s += alphabet[Math.floor(next() * alphabet.length)]
      texts.push(s)
    }
    for (let i = 0; i < 3000; i++) {
      let s = ''
      for (let j = 1 + Math.floor(next() * 12); j > 0; j--) {
        let cp = next() < 0.8 ? Math.floor(next() * 0x10000) : 0x10000 + Math.floor(next() * 0x30000)
        if (cp >= 0xd800 && cp <= 0xdfff) cp = 0x41
        s += String.fromCodePoint(cp) + (next() < 0.3 ? ' ' : '')
      }
      texts.push(s)
    }
    texts.push(...TRAINING_TEXT.split('\n'), TRAINING_TEXT)
    const differ = texts.filter((t) => JSON.stringify(llama.tokenize(t)) !== JSON.stringify(ours.encode(t)))
    console.log(`llama.cpp vs our tokenizer: ${texts.length} texts, ${differ.length} with other ids`)
    expect(differ).toEqual([])
  })
})

describe('the needle preset\'s ordinary added tokens (user-defined in the GGUF) are matched in text as Hugging Face does', () => {
  it('2,000 seeded texts mixing its 25 added phrases with ordinary text', async () => {
    const dir = join(scratch, 'needle')
    await makeCheckpoint({ preset: 'needle', seed: 1, out: dir })
    await exportGguf({ model: dir, out: join(scratch, 'needle.gguf') })
    const needle = await LlamaCppModel.load(join(scratch, 'needle.gguf'))
    try {
      const tokenizer = await loadTokenizer(dir)
      const phrases = needleVocabulary()
      let seed = 3
      const next = () => { seed = (Math.imul(seed, 1103515245) + 12345) >>> 0; return seed / 2 ** 32 }
      const filler = ['the ', ' ', 'x', 'code', '-', '\n', 'word', 'secret ']
      let differ = 0
      for (let i = 0; i < 2000; i++) {
        let s = ''
        for (let j = 0; j < 6; j++) s += next() < 0.5 ? phrases[Math.floor(next() * phrases.length)] : filler[Math.floor(next() * filler.length)]
        if (JSON.stringify(needle.tokenize(s)) !== JSON.stringify(tokenizer.encode(s))) differ++
      }
      expect(phrases.length).toBe(25)
      expect(differ).toBe(0)
    }
    finally {
      await needle.dispose()
    }
  })
})

describe('llama.cpp decodes as the checkpoint\'s tokenizer does', () => {
  it('the 6 decode cases (invalid UTF-8, a BOM, special tokens kept and skipped)', () => {
    for (const d of cases.decodes) expect(llama.detokenize(d.ids, d.skipSpecialTokens), JSON.stringify(d.ids)).toBe(d.text)
  })

  it('every case decodes back to its text, spaces before punctuation kept (no clean-up)', () => {
    for (const c of cases.cases) expect(llama.detokenize(c.ids), JSON.stringify(c.text)).toBe(c.decoded)
  })
})

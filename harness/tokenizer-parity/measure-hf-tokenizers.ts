// Measures @huggingface/tokenizers (pure TypeScript, not a dependency of this project) against the
// Rust library's fixtures and against ours: exact texts per test tokenizer, and encode speed.
// Run with the package installed elsewhere (npm install --prefix DIR @huggingface/tokenizers@0.2.0):
//   HF_TOKENIZERS=DIR/node_modules/@huggingface/tokenizers/dist/tokenizers.mjs npx tsx harness/tokenizer-parity/measure-hf-tokenizers.ts
// docs/tokenizer.md records what it printed and the choice it supports.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Tokenizer } from '../../src/model/tokenizer/index.ts'
import { INPUTS_DIR } from './make-inputs.ts'

interface HfTokenizer { encode (text: string, options?: { add_special_tokens?: boolean }): { ids: number[] } }
const FIXTURES = fileURLToPath(new URL('../fixtures/tokenizer-parity/', import.meta.url))
const module = process.env.HF_TOKENIZERS
if (module === undefined) throw new Error('set HF_TOKENIZERS to the package\'s dist/tokenizers.mjs')
const hf = await import(module) as { Tokenizer: new (json: object, config: object) => HfTokenizer }

// Median of 5 runs of encoding every text `rounds` times (ms); a measurement, never an assertion.
function time (encode: (t: string) => unknown, texts: readonly string[], rounds: number): number {
  const runs: number[] = []
  for (let r = 0; r < 5; r++) {
    const t0 = performance.now()
    for (let i = 0; i < rounds; i++) for (const t of texts) encode(t)
    runs.push(performance.now() - t0)
  }
  return runs.sort((a, b) => a - b)[2]
}

for (const name of ['deepseek-v3', 'flags', 'tiny-gpt2']) {
  const json = JSON.parse(readFileSync(join(INPUTS_DIR, name, 'tokenizer.json'), 'utf8'))
  const config = JSON.parse(readFileSync(join(INPUTS_DIR, name, 'tokenizer_config.json'), 'utf8'))
  const fixture = JSON.parse(readFileSync(join(FIXTURES, `${name}.json`), 'utf8')) as { texts: Array<{ text: string, ids: number[], ids_with_special_tokens: number[] }> }
  const ours = Tokenizer.fromJson(json)
  const theirs = new hf.Tokenizer(json, config)
  let exact = 0
  let failed = 0
  const firstWrong: string[] = []
  for (const t of fixture.texts) {
    try {
      const same = JSON.stringify(theirs.encode(t.text, { add_special_tokens: false }).ids) === JSON.stringify(t.ids) &&
        JSON.stringify(theirs.encode(t.text, { add_special_tokens: true }).ids) === JSON.stringify(t.ids_with_special_tokens)
      if (same) exact++
      else if (firstWrong.length < 3) firstWrong.push(JSON.stringify(t.text).slice(0, 60))
    } catch {
      failed++
    }
  }
  // Speed on prose-like text long enough to matter (the corpus texts, joined, 20 times over).
  const long = [fixture.texts.map((t) => t.text.replace(/\p{Cs}/gu, '\ufffd')).join('\n').repeat(20)]
  const oursMs = time((s) => ours.encode(s), long, 1)
  const theirsMs = time((s) => theirs.encode(s, { add_special_tokens: false }), long, 1)
  const chars = long[0].length
  process.stdout.write(`${name}: @huggingface/tokenizers exact ${exact}/${fixture.texts.length} (threw on ${failed}); first wrong: ${firstWrong.join(' | ')}\n`)
  process.stdout.write(`${name}: ${chars} chars: ours ${oursMs.toFixed(0)} ms, @huggingface/tokenizers ${theirsMs.toFixed(0)} ms (median of 5)\n`)
}

// A checkpoint whose tokenizer.json has DeepSeek's structure (Split sequence + ByteLevel without
// regex) exports to a GGUF with llama.cpp's `deepseek-v3` pre-tokenizer, and llama.cpp
// (node-llama-cpp 3.22.1) then gives ours' ids, which suites/tokenizer/parity.test.ts holds equal
// to the Rust library's, on the whole parity corpus.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LlamaCppModel } from '../../src/engines/llama-cpp/runner.ts'
import { makeCheckpoint } from '../../src/model/checkpoint/index.ts'
import { readGgufHeader } from '../../src/formats/gguf/index.ts'
import { exportGguf } from '../../src/model/gguf/index.ts'
import { buildTokenizerFiles, loadTokenizer, type Tokenizer } from '../../src/model/tokenizer/index.ts'
import { repoPath } from './helpers.ts'

let scratch: string
let llama: LlamaCppModel
let ours: Tokenizer
beforeAll(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'pd-bridge-llama-ds-'))
  await makeCheckpoint({ preset: 'tiny', seed: 1, out: join(scratch, 'tiny') })
  writeFileSync(join(scratch, 'tiny', 'tokenizer.json'), buildTokenizerFiles(512, 32768, [], { structure: 'deepseek-v3' })['tokenizer.json'])
  await exportGguf({ model: join(scratch, 'tiny'), out: join(scratch, 'tiny.gguf') })
  llama = await LlamaCppModel.load(join(scratch, 'tiny.gguf'))
  ours = await loadTokenizer(join(scratch, 'tiny'))
})
afterAll(async () => {
  await llama?.dispose()
  rmSync(scratch, { recursive: true, force: true })
})

describe("llama.cpp on DeepSeek's tokenizer structure", () => {
  it('the GGUF names the deepseek-v3 pre-tokenizer and carries the chat template', async () => {
    const meta = (await readGgufHeader(join(scratch, 'tiny.gguf'))).metadata
    expect(meta.get('tokenizer.ggml.pre')).toEqual({ type: 'STRING', value: 'deepseek-v3' })
    expect(meta.get('tokenizer.chat_template')).toEqual({ type: 'STRING', value: ours.chatFormat.template })
  })

  it('gives our ids for every text of the parity corpus', () => {
    const texts: string[] = JSON.parse(readFileSync(repoPath('harness/tokenizer-parity/inputs/corpus.json'), 'utf8')).texts
    // llama.cpp takes UTF-8, so a lone surrogate reaches it as U+FFFD, as it reaches ours.
    const wrong = texts.filter((t) => JSON.stringify(llama.tokenize(t.replace(/\p{Cs}/gu, '\ufffd'))) !== JSON.stringify(ours.encode(t)))
    process.stdout.write(`llama.cpp deepseek-v3 parity: ${texts.length - wrong.length}/${texts.length}\n`)
    expect(wrong).toEqual([])
  })
})

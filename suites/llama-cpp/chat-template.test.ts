// llama.cpp's own rendering of the chat template a GGUF carries, held to ours and to transformers'
// apply_chat_template (the committed parity fixtures): the same 11 conversations (system, multi-turn,
// tools, tool calls and results, reasoning, thinking on and off, hostile content) under each of the
// three parity templates, character for character. llama.cpp renders with its native Jinja engine
// (src/engines/llama-cpp/chat-template.ts), which shares no code with @huggingface/jinja.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LlamaCppChatTemplate } from '../../src/engines/llama-cpp/chat-template.ts'
import { makeCheckpoint } from '../../src/model/checkpoint/index.ts'
import { readGgufHeader } from '../../src/formats/gguf/index.ts'
import { exportGguf } from '../../src/model/gguf/index.ts'
import { ChatFormat } from '../../src/model/tokenizer/index.ts'
import type { ChatCase } from '../../harness/tokenizer-parity/chats.ts'
import { repoPath } from './helpers.ts'

const NAMES = ['deepseek-v3', 'flags', 'tiny-gpt2'] as const
const input = (p: string): string => readFileSync(repoPath(`harness/tokenizer-parity/inputs/${p}`), 'utf8')
const cases: ChatCase[] = JSON.parse(input('chats.json')).cases
const transformers = (name: string): Array<{ name: string, text: string }> =>
  JSON.parse(readFileSync(repoPath(`harness/fixtures/tokenizer-parity/${name}.json`), 'utf8')).chats

let scratch: string
let ggufTemplate: string
beforeAll(async () => {
  // The template llama.cpp renders is the one export-gguf wrote into the GGUF, read back from it.
  scratch = mkdtempSync(join(tmpdir(), 'pd-bridge-llama-chat-'))
  const dir = join(scratch, 'tiny')
  await makeCheckpoint({ preset: 'tiny', seed: 1, out: dir })
  writeFileSync(join(dir, 'tokenizer_config.json'), input('deepseek-v3/tokenizer_config.json'))
  await exportGguf({ model: dir, out: join(scratch, 'tiny.gguf') })
  const meta = (await readGgufHeader(join(scratch, 'tiny.gguf'))).metadata.get('tokenizer.chat_template')
  ggufTemplate = (meta as { value: string }).value
})
afterAll(() => {
  rmSync(scratch, { recursive: true, force: true })
})

describe.each(NAMES)("llama.cpp's rendering of the %s template", (name) => {
  it('equals ours and transformers\' for every conversation', async () => {
    const ours = ChatFormat.fromConfig(JSON.parse(input(`${name}/tokenizer_config.json`))) as ChatFormat
    // deepseek-v3's template comes out of the GGUF; it must be the template itself.
    if (name === 'deepseek-v3') expect(ggufTemplate).toBe(ours.template)
    const llama = await LlamaCppChatTemplate.compile(name === 'deepseek-v3' ? ggufTemplate : ours.template, ours.specials)
    const want = transformers(name)
    const wrong: unknown[] = []
    cases.forEach((c, i) => {
      const options = { addGenerationPrompt: c.addGenerationPrompt, tools: c.tools, kwargs: c.kwargs }
      const got = llama.render(c.messages, options)
      // llama.cpp holds text as UTF-8, so a lone surrogate (one case has one) is U+FFFD there, as
      // the tokenizer makes it on our side: the prompt's UTF-8 bytes are what is compared.
      const utf8 = (t: string): string => t.replace(/\p{Cs}/gu, '\ufffd')
      if (got !== utf8(want[i].text) || got !== utf8(ours.render(c.messages, options))) wrong.push({ name: c.name, llama: got, transformers: want[i].text })
    })
    process.stdout.write(`llama.cpp chat template ${name}: ${cases.length - wrong.length}/${cases.length} renderings equal to ours and transformers'\n`)
    expect(wrong).toEqual([])
    expect(cases.length).toBe(11)
  })
})

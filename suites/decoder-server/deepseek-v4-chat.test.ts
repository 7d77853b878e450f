// A decoder on a tiny checkpoint shipped as DeepSeek ships V4 (DeepSeek's tokenizer structure, no
// chat_template), driven by the official openai client with tools, tool calls, tool results,
// reasoning in history, thinking and reasoning_effort: the prompt ids it reports are the ids of the
// text DeepSeek's own encoding script rendered for the same conversation (the committed fixture).
import OpenAI from 'openai'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { makeCheckpoint } from '../../src/model/checkpoint/index.ts'
import { DeepseekV4Format, loadTokenizer, type Tokenizer } from '../../src/model/tokenizer/index.ts'
import { chatCompletion, type FinishedChoice } from '../../src/engines/decoder/responses.ts'
import type { GenerationOutcome } from '../../src/engines/decoder/generate.ts'
import { startDecoderChild, tempDir, type DecoderChild } from './helpers.ts'

const CASES = fileURLToPath(new URL('../../harness/deepseek-v4-encoding/cases.json', import.meta.url))
const FIXTURE = fileURLToPath(new URL('../../harness/fixtures/deepseek-v4-encoding.json', import.meta.url))
interface Case { name: string, messages: unknown[], tools?: unknown[], chat_template_kwargs?: Record<string, unknown> }
const cases = (JSON.parse(readFileSync(CASES, 'utf8')) as { cases: Case[] }).cases
const rendered = (JSON.parse(readFileSync(FIXTURE, 'utf8')) as { renderings: Array<{ name: string, text?: string }> }).renderings

const tmp = tempDir('decoder-dsv4-chat')
let server: DecoderChild
let client: OpenAI
let tokenizer: Tokenizer

beforeAll(async () => {
  const dir = `${tmp.dir}/model`
  await makeCheckpoint({ preset: 'tiny', seed: 1, out: dir, tokenizerStructure: 'deepseek-v3', chatFormat: 'deepseek-v4-encoding' })
  ;[server, tokenizer] = await Promise.all([
    startDecoderChild(['--model', dir, '--cache-dir', `${tmp.dir}/cache`, '--block-size', '256', '--max-tokens', '8'], `${tmp.dir}/decoder.log`),
    loadTokenizer(dir),
  ])
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 })
})

afterAll(async () => {
  await server?.stop()
  tmp.remove()
})

const SENT = ['tools and tool results, thinking', 'multi-turn, thinking: earlier reasoning dropped']

describe('a V4 checkpoint without a template renders with DeepSeek\'s encoding, over HTTP', () => {
  it('loads DeepSeek\'s encoding as its chat format and shows its digest', async () => {
    expect(tokenizer.chatFormat.kind).toBe('deepseek-v4')
    const health = await (await fetch(`${server.url}/health`)).json() as Record<string, unknown>
    expect(health.chat_template_digest).toBe(new DeepseekV4Format().digest)
  })

  it.each(SENT)('%s: the prompt ids are the reference rendering\'s ids', async (name) => {
    const c = cases.find((x) => x.name === name)!
    const want = rendered.find((x) => x.name === name)!.text!
    const body = {
      messages: c.messages, max_tokens: 1, return_token_ids: true,
      ...(c.tools === undefined ? {} : { tools: c.tools }), ...(c.chat_template_kwargs === undefined ? {} : { chat_template_kwargs: c.chat_template_kwargs }),
    }
    type Answer = { prompt_token_ids: number[], usage: { prompt_tokens: number }, choices: Array<{ message: Record<string, unknown> }> }
    const data = await client.chat.completions.create(body as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming) as unknown as Answer
    const ids = tokenizer.encode(want)
    expect(data.prompt_token_ids).toEqual(ids)
    expect(data.usage.prompt_tokens).toBe(ids.length)
    // In thinking mode the reply is reasoning until </think>: a 1-token reply is all reasoning.
    if (c.chat_template_kwargs?.thinking === true) expect(data.choices[0].message).toMatchObject({ content: '', reasoning_content: expect.any(String) })
  })

  it('reasoning_effort as a request field is the same as in chat_template_kwargs', async () => {
    const c = cases.find((x) => x.name === 'reasoning_effort max, thinking')!
    const data = await client.chat.completions.create({ messages: c.messages, max_tokens: 1, return_token_ids: true, reasoning_effort: 'max', chat_template_kwargs: { thinking: true } } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming) as unknown as { prompt_token_ids: number[] }
    expect(data.prompt_token_ids).toEqual(tokenizer.encode(rendered.find((x) => x.name === c.name)!.text!))
  })

  it('what the encoding refuses is a 400 naming messages', async () => {
    const empty = await fetch(`${server.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ messages: [{ role: 'developer', content: '' }, { role: 'user', content: 'x' }] }) })
    expect(empty.status).toBe(400)
    expect((await empty.json() as { error: object }).error).toMatchObject({ param: 'messages', message: expect.stringMatching(/developer message needs content/) })
  })
})

describe('a reply split into tool calls is OpenAI\'s message', () => {
  const outcome = { text: 'raw', completionIds: [5], promptTokens: 3, cachedTokens: 0 } as unknown as GenerationOutcome
  const head = { id: 'chatcmpl-x', created: 0, model: 'm', system_fingerprint: 'fp' }

  it('tool calls with ids, content null when empty, finish_reason tool_calls; reasoning beside content', () => {
    const parts = new DeepseekV4Format().parseReply('Let me look.</think>\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="f">\n<｜DSML｜parameter name="q" string="true">x</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>', { kwargs: { thinking: true } })
    const choice: FinishedChoice = { outcome, finish: 'stop', logprobs: null, parts }
    const body = chatCompletion(head, [choice]) as { choices: Array<{ message: Record<string, unknown>, finish_reason: string }> }
    expect(body.choices[0].finish_reason).toBe('tool_calls')
    expect(body.choices[0].message).toEqual({
      role: 'assistant', content: null, refusal: null, reasoning_content: 'Let me look.',
      tool_calls: [{ id: expect.stringMatching(/^call_[0-9a-f]{24}$/), type: 'function', function: { name: 'f', arguments: '{"q": "x"}' } }],
    })
    // Cut by max_tokens: the reason stays length.
    expect((chatCompletion(head, [{ ...choice, finish: 'length' }]) as { choices: Array<{ finish_reason: string }> }).choices[0].finish_reason).toBe('length')
    // No split defined (a Jinja template): the text as it came.
    expect((chatCompletion(head, [{ outcome, finish: 'stop', logprobs: null }]) as { choices: Array<{ message: object }> }).choices[0].message).toEqual({ role: 'assistant', content: 'raw', refusal: null })
  })
})

// Seeded sampling through the embedded stack that `serve` runs (startEmbeddedStack: prefill engine,
// share, decoder with its store, front door, as child processes on 127.0.0.1), for both decoder
// kinds, driven by the official openai client. For several parameter sets a fresh ~600-token
// prompt goes through the front door (bridged: the verdict says so and the decoder restores the
// bridged blocks) and the same request to a second decoder of the same kind with an empty store
// (native): the sampled token ids are equal, token for token. A request without a seed gets the
// decoder's drawn seed back through the front door, and that seed repeats the answer.
import { join } from 'node:path'
import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { HANG_LIMIT_MS } from '../support/hang-limit.ts'
import { loadTokenizer, type Tokenizer } from '../../src/model/tokenizer/index.ts'
import { buildDemoPrompt } from '../../src/stack/demo/prompt.ts'
import { startEmbeddedStack, startNativeLeg, type DecoderEngine, type EmbeddedStack, type NativeLeg } from '../../src/stack/embedded.ts'
import { tempDir } from './helpers.ts'

const tmp = tempDir('stack-sampling')
afterAll(() => tmp.remove())

interface Answer { ids: number[], text: string, verdict: string | null, cached: number, seed: number | undefined }

async function ask (url: string, body: Record<string, unknown>): Promise<Answer> {
  const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: HANG_LIMIT_MS })
  const { data, response } = await client.chat.completions.create({ ...body, return_token_ids: true } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming).withResponse()
  return {
    ids: (data.choices[0] as unknown as { token_ids: number[] }).token_ids,
    text: data.choices[0].message.content ?? '',
    verdict: response.headers.get('x-pd-bridge'),
    cached: data.usage?.prompt_tokens_details?.cached_tokens ?? -1,
    seed: (data as unknown as { pd_decoder?: { seed?: number } }).pd_decoder?.seed,
  }
}

const PARAMETER_SETS: Array<[string, Record<string, number>]> = [
  ['temperature 1, seed 7', { temperature: 1, seed: 7 }],
  ['temperature 1.3, top_p 0.85, top_k 40, seed 1234', { temperature: 1.3, top_p: 0.85, top_k: 40, seed: 1234 }],
  ['temperature 0.9, min_p 0.05, presence 0.4, frequency 0.8, seed 99', { temperature: 0.9, min_p: 0.05, presence_penalty: 0.4, frequency_penalty: 0.8, seed: 99 }],
]

describe.each(['ours', 'llama.cpp'] as DecoderEngine[])('seeded sampling, bridged vs native, decoder %s', (engine) => {
  let stack: EmbeddedStack
  let native: NativeLeg
  let tokenizer: Tokenizer

  beforeAll(async () => {
    stack = await startEmbeddedStack({ stateDir: join(tmp.dir, 'state'), home: join(tmp.dir, engine), decoderEngine: engine, port: 0 })
    native = await startNativeLeg(stack, 'sampling')
    tokenizer = await loadTokenizer(stack.checkpoint.dir)
  })

  afterAll(async () => {
    await stack?.stop()
  })

  it.each(PARAMETER_SETS.map(([what, params], i) => [what, params, 500 + i] as const))('%s: the bridged answer equals the native one, token for token', async (_what, params, promptSeed) => {
    const prompt = buildDemoPrompt(tokenizer, 600, promptSeed)
    const body = { model: stack.modelName, messages: prompt.messages, max_tokens: 12, ...params }
    const bridged = await ask(stack.urls.front, body)
    expect(bridged.verdict).toBe(`complete`)
    expect(bridged.cached).toBe(512)
    const alone = await ask(native.url, body)
    expect(alone.cached).toBe(0)
    expect(bridged.ids).toEqual(alone.ids)
    expect(bridged.text).toBe(alone.text)
    // More than an end-of-sentence token: there is an answer to compare.
    expect(bridged.ids.length).toBeGreaterThan(1)
    console.log(`${engine} ${_what}: ${bridged.ids.length} identical tokens ${JSON.stringify(bridged.ids)}`)
    expect(bridged.seed).toBe(params.seed)
  })

  it('a request without a seed gets the drawn one back through the front door, and it repeats the answer', async () => {
    const prompt = buildDemoPrompt(tokenizer, 600, 900)
    const body = { model: stack.modelName, messages: prompt.messages, max_tokens: 8, temperature: 1.1 }
    const first = await ask(stack.urls.front, body)
    expect(Number.isSafeInteger(first.seed)).toBe(true)
    const alone = await ask(native.url, { ...body, seed: first.seed })
    expect(alone.ids).toEqual(first.ids)
  })
})

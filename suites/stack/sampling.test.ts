// Seeded sampling through the embedded stack that `serve` runs (startEmbeddedStack: prefill engine,
// share, decoder with its store, front door, as child processes on 127.0.0.1), for both decoder
// kinds, driven by the official openai client (harness/sampling/bridged-vs-native.ts). A fresh
// ~600-token prompt with every sampling parameter at once goes through the front door (bridged: the
// verdict says so and the decoder restores the bridged blocks) and the same request to a second
// decoder of the same kind with an empty store (native): the sampled token ids are equal, token for
// token. A request without a seed gets the decoder's drawn seed back through the front door, and
// that seed repeats the answer. The other parameter sets and more prompts per set are
// protocols/sampling.mjs; each sampler on its own is suites/decoder-server/sampling*.test.ts and
// suites/llama-cpp/sampling.test.ts. On the same stacks (no second start), a greedy chat with tools,
// a tool call, its result and reasoning in history is bridged into each kind: the same prompt ids as
// the native decoder, verdict complete, the bridged tokens reported cached, the same answer.
import { join } from 'node:path'
import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { HANG_LIMIT_MS } from '../support/hang-limit.ts'
import { bridgedVsNative, drawnSeedRepeats, PARAMETER_SETS, type SamplingTarget } from '../../harness/sampling/bridged-vs-native.ts'
import { loadTokenizer } from '../../src/model/tokenizer/index.ts'
import { buildDemoPrompt } from '../../src/stack/demo/prompt.ts'
import { startEmbeddedStack, startNativeLeg, type DecoderEngine, type EmbeddedStack } from '../../src/stack/embedded.ts'
import { tempDir } from './helpers.ts'

const tmp = tempDir('stack-sampling')
afterAll(() => tmp.remove())

const [EVERY_PARAMETER] = PARAMETER_SETS

describe.each(['ours', 'llama.cpp'] as DecoderEngine[])('seeded sampling, bridged vs native, decoder %s', (engine) => {
  let stack: EmbeddedStack
  let target: SamplingTarget

  beforeAll(async () => {
    stack = await startEmbeddedStack({ stateDir: join(tmp.dir, 'state'), home: join(tmp.dir, engine), decoderEngine: engine, port: 0 })
    const native = await startNativeLeg(stack, 'sampling')
    target = { frontUrl: stack.urls.front, nativeUrl: native.url, modelName: stack.modelName, tokenizer: await loadTokenizer(stack.checkpoint.dir), timeoutMs: HANG_LIMIT_MS }
  })

  afterAll(async () => {
    await stack?.stop()
  })

  it(`${EVERY_PARAMETER.name}: the bridged answer equals the native one, token for token`, async () => {
    const c = await bridgedVsNative(target, EVERY_PARAMETER.params, 500, 600, 12, 512)
    expect(c.problems).toEqual([])
    expect(c.bridged.ids).toEqual(c.native.ids)
    console.log(`${engine} ${EVERY_PARAMETER.name}: ${c.bridged.ids.length} identical tokens ${JSON.stringify(c.bridged.ids)}`)
  })

  it('a chat with tools is bridged: the native decoder\'s prompt ids, verdict complete, the bridged tokens cached, the same answer', async () => {
    const prompt = buildDemoPrompt(target.tokenizer, 600, 1300)
    const body = {
      model: stack.modelName, max_tokens: 8, temperature: 0, return_token_ids: true,
      tools: [{ type: 'function', function: { name: 'lookup', description: 'Look it up.', parameters: { type: 'object', properties: { q: { type: 'string' } } } } }],
      messages: [
        ...prompt.messages,
        { role: 'assistant', content: '', reasoning_content: 'I should look it up.', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'lookup', arguments: '{"q": "marigold"}' } }] },
        { role: 'tool', tool_call_id: 'c1', content: 'found 2' },
        { role: 'user', content: 'And so?' },
      ],
    }
    type Answer = { prompt_token_ids: number[], choices: Array<{ token_ids: number[] }>, usage: OpenAI.CompletionUsage, pd_bridge?: { bridged_tokens: number } }
    const ask = async (url: string) => {
      const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: HANG_LIMIT_MS })
      const { data, response } = await client.chat.completions.create(body as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming).withResponse()
      return { data: data as unknown as Answer, verdict: response.headers.get('x-pd-bridge') }
    }
    const bridged = await ask(target.frontUrl)
    const native = await ask(target.nativeUrl)
    expect(bridged.data.prompt_token_ids).toEqual(native.data.prompt_token_ids)
    expect(bridged.verdict).toBe('complete')
    expect(bridged.data.pd_bridge?.bridged_tokens).toBeGreaterThan(0)
    expect(bridged.data.usage.prompt_tokens_details?.cached_tokens).toBe(bridged.data.pd_bridge?.bridged_tokens)
    expect(native.data.usage.prompt_tokens_details?.cached_tokens).toBe(0)
    expect(bridged.data.choices[0].token_ids).toEqual(native.data.choices[0].token_ids)
    console.log(`${engine} chat with tools: ${bridged.data.prompt_token_ids.length} prompt tokens, ${String(bridged.data.pd_bridge?.bridged_tokens)} bridged and cached`)
  })

  it('a request without a seed gets the drawn one back through the front door, and it repeats the answer', async () => {
    const c = await drawnSeedRepeats(target, 900, 600, 8)
    expect(c.problems).toEqual([])
    expect(Number.isSafeInteger(c.bridged.seed)).toBe(true)
    expect(c.native.ids).toEqual(c.bridged.ids)
  })
})

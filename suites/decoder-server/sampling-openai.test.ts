// Sampling on `pd-bridge decoder` (our engine) as a real child process, driven by the official
// openai client: a seeded answer equals the same sampler run in process on DeepseekV4Engine (so it
// is a pure function of prompt, parameters and seed), for several parameter sets; a request
// without a seed reports the one it drew and repeating it repeats the answer; log-probabilities in
// OpenAI's shapes, whole and streamed alike; n choices, choice i being seed + i's answer.
import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DeepseekV4Engine } from '../../src/model/engine/index.ts'
import { renderChat, type ChatMessage } from '../../src/model/tokenizer/index.ts'
import { GREEDY, SequenceSampler, logSumExp, type SamplingOptions } from '../../src/engines/decoder/sampling/index.ts'
import { cutAtEos, makeTiny, startDecoderChild, tempDir, tinyTokenizer, type DecoderChild } from './helpers.ts'

const tmp = tempDir('decoder-sampling')
const tokenizer = tinyTokenizer()
const EOS = 1
let engine: DeepseekV4Engine
let server: DecoderChild
let client: OpenAI

beforeAll(async () => {
  const modelDir = await makeTiny(`${tmp.dir}/model`)
  ;[server, engine] = await Promise.all([
    startDecoderChild(['--model', modelDir, '--cache-dir', `${tmp.dir}/cache`, '--block-size', '256', '--max-tokens', '64'], `${tmp.dir}/decoder.log`),
    DeepseekV4Engine.load(modelDir, 'decoder'),
  ])
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 })
})

afterAll(async () => {
  await server?.stop()
  tmp.remove()
})

type Extra = { return_token_ids?: boolean, top_k?: number, min_p?: number }
interface IdsChoice { token_ids: number[] }
interface DecoderField { pd_decoder?: { seed?: number } }

const messages: ChatMessage[] = [{ role: 'user', content: 'Write a line about the tide.' }]
const model = (): string => server.ready.model as string
const prompt = (): number[] => tokenizer.encode(renderChat(messages, true))

/** The sampler run in process on the engine, as the server's decode loop runs it. */
function sampledInProcess (tokens: number[], o: Partial<SamplingOptions>, seed: number, k: number, choice = 0): number[] {
  const sampler = new SequenceSampler({ ...GREEDY, ...o }, seed, choice)
  const cache = engine.newCache()
  let logits = engine.prefill(tokens, cache).logits
  const out: number[] = []
  for (let i = 0; i < k; i++) {
    const next = sampler.pick(logits).token
    out.push(next)
    if (next === EOS) break
    logits = engine.decode(next, cache)
  }
  return cutAtEos(out, EOS)
}

const PARAMETER_SETS: Array<[string, Record<string, number>, Partial<SamplingOptions>]> = [
  ['temperature 1', { temperature: 1 }, { temperature: 1 }],
  ['temperature 1.3, top_p 0.9', { temperature: 1.3, top_p: 0.9 }, { temperature: 1.3, topP: 0.9 }],
  ['temperature 0.8, top_k 20, min_p 0.05', { temperature: 0.8, top_k: 20, min_p: 0.05 }, { temperature: 0.8, topK: 20, minP: 0.05 }],
  ['temperature 1.1 with presence 0.6 and frequency 0.9 penalties', { temperature: 1.1, presence_penalty: 0.6, frequency_penalty: 0.9 }, { temperature: 1.1, presencePenalty: 0.6, frequencyPenalty: 0.9 }],
  ['greedy with a frequency penalty', { temperature: 0, frequency_penalty: 1.5 }, { frequencyPenalty: 1.5 }],
]

describe('a seeded answer is the sampler\'s, token for token', () => {
  it.each(PARAMETER_SETS)('%s: the server\'s ids equal the in-process sampler\'s for two seeds, and repeat', async (_what, body, o) => {
    for (const seed of [11, 2026]) {
      const ask = async (): Promise<number[]> => {
        const r = await client.chat.completions.create({ model: model(), messages, max_tokens: 16, seed, return_token_ids: true, ...body } as OpenAI.ChatCompletionCreateParamsNonStreaming & Extra)
        return (r.choices[0] as unknown as IdsChoice).token_ids
      }
      const got = await ask()
      expect(cutAtEos(got, EOS)).toEqual(sampledInProcess(prompt(), o, seed, 16))
      expect(await ask()).toEqual(got)
    }
  })

  it('different seeds give different answers at temperature 1 (the seed is used)', async () => {
    const answers = new Set<string>()
    for (const seed of [1, 2, 3, 4]) {
      const r = await client.completions.create({ model: model(), prompt: 'The sea', max_tokens: 12, temperature: 1, seed, return_token_ids: true } as OpenAI.CompletionCreateParamsNonStreaming & Extra)
      answers.add(JSON.stringify((r.choices[0] as unknown as IdsChoice).token_ids))
    }
    expect(answers.size).toBeGreaterThan(1)
  })
})

describe('the seed of a request that sent none', () => {
  it('is reported as pd_decoder.seed, and sending it back repeats the answer; greedy answers carry none', async () => {
    const first = await client.chat.completions.create({ model: model(), messages, max_tokens: 12, temperature: 1.2, return_token_ids: true } as OpenAI.ChatCompletionCreateParamsNonStreaming & Extra)
    const seed = (first as unknown as DecoderField).pd_decoder?.seed
    expect(Number.isSafeInteger(seed)).toBe(true)
    const again = await client.chat.completions.create({ model: model(), messages, max_tokens: 12, temperature: 1.2, seed, return_token_ids: true } as OpenAI.ChatCompletionCreateParamsNonStreaming & Extra)
    expect((again.choices[0] as unknown as IdsChoice).token_ids).toEqual((first.choices[0] as unknown as IdsChoice).token_ids)
    expect((again as unknown as DecoderField).pd_decoder).toEqual({ seed })
    const greedy = await client.chat.completions.create({ model: model(), messages, max_tokens: 4 })
    expect((greedy as unknown as DecoderField).pd_decoder).toBeUndefined()
  })

  it('is on each streamed choice\'s finish chunk and on the usage chunk', async () => {
    const stream = await client.chat.completions.create({ model: model(), messages, max_tokens: 6, temperature: 1, seed: 99, stream: true, stream_options: { include_usage: true } })
    const chunks: Array<Record<string, any>> = []
    for await (const c of stream) chunks.push(c as unknown as Record<string, any>)
    const finish = chunks.find((c) => c.choices[0]?.finish_reason !== null && c.choices.length > 0)
    expect(finish?.pd_decoder).toEqual({ seed: 99 })
    expect(chunks.at(-1)?.pd_decoder).toMatchObject({ seed: 99 })
  })
})

describe('log-probabilities', () => {
  it('chat: one entry per token with token, logprob, bytes and top_logprobs of the raw distribution; streamed entries concatenate to the whole', async () => {
    const body = { model: model(), messages, max_tokens: 10, temperature: 0.9, seed: 5, logprobs: true, top_logprobs: 3, return_token_ids: true }
    const whole = await client.chat.completions.create(body as OpenAI.ChatCompletionCreateParamsNonStreaming & Extra)
    const ids = (whole.choices[0] as unknown as IdsChoice).token_ids
    const content = whole.choices[0].logprobs?.content ?? []
    const answer = cutAtEos(ids, EOS)
    expect(content.map((e) => e.token)).toEqual(answer.map((t) => tokenizer.decode([t])))
    // The raw distribution at each position: recompute it in process from the same ids.
    const cache = engine.newCache()
    let logits = engine.prefill(prompt(), cache).logits
    for (const [i, e] of content.entries()) {
      const lse = logSumExp(logits)
      expect(e.logprob).toBe(logits[answer[i]] - lse)
      expect(e.top_logprobs).toHaveLength(3)
      expect(e.top_logprobs[0].logprob).toBe(Math.max(...logits) - lse)
      // The token's own bytes (a byte-level token may hold part of a character, shown as U+FFFD).
      expect(Buffer.from(e.bytes ?? []).toString('utf8')).toBe(e.token)
      logits = engine.decode(answer[i], cache)
    }
    const stream = await client.chat.completions.create({ ...body, stream: true } as unknown as OpenAI.ChatCompletionCreateParamsStreaming)
    const streamed: unknown[] = []
    let text = ''
    for await (const c of stream) {
      streamed.push(...(c.choices[0]?.logprobs?.content ?? []))
      text += c.choices[0]?.delta?.content ?? ''
    }
    expect(streamed).toEqual(content)
    expect(text).toBe(whole.choices[0].message.content)
  })

  it('completions: tokens, token_logprobs, top_logprobs and text_offset; whole and streamed alike', async () => {
    const body = { model: model(), prompt: 'The sea is', max_tokens: 8, temperature: 1, seed: 3, logprobs: 2 }
    const whole = await client.completions.create(body)
    const lp = whole.choices[0].logprobs
    expect(lp?.tokens?.length).toBeGreaterThan(0)
    expect(lp?.token_logprobs).toHaveLength(lp?.tokens?.length ?? -1)
    for (const top of lp?.top_logprobs ?? []) expect(Object.keys(top).length).toBeGreaterThanOrEqual(1)
    let offset = 0
    for (const [i, t] of (lp?.tokens ?? []).entries()) {
      expect(lp?.text_offset?.[i]).toBe(offset)
      offset += t.length
    }
    const stream = await client.completions.create({ ...body, stream: true })
    const joined = { tokens: [] as string[], token_logprobs: [] as number[], text_offset: [] as number[] }
    for await (const c of stream) {
      const part = c.choices[0]?.logprobs
      if (part === null || part === undefined) continue
      joined.tokens.push(...(part.tokens ?? []))
      joined.token_logprobs.push(...(part.token_logprobs ?? []))
      joined.text_offset.push(...(part.text_offset ?? []))
    }
    expect(joined).toEqual({ tokens: lp?.tokens, token_logprobs: lp?.token_logprobs, text_offset: lp?.text_offset })
  })
})

describe('n choices', () => {
  it('n 3 gives three choices, choice i being the answer of seed + i, usage summed', async () => {
    const seed = 40
    const r = await client.chat.completions.create({ model: model(), messages, max_tokens: 8, temperature: 1, seed, n: 3, return_token_ids: true } as OpenAI.ChatCompletionCreateParamsNonStreaming & Extra)
    expect(r.choices.map((c) => c.index)).toEqual([0, 1, 2])
    const ids = r.choices.map((c) => (c as unknown as IdsChoice).token_ids)
    for (const [i, got] of ids.entries()) expect(cutAtEos(got, EOS)).toEqual(sampledInProcess(prompt(), { temperature: 1 }, seed + i, 8))
    expect(r.usage?.completion_tokens).toBe(ids.reduce((a, b) => a + b.length, 0))
    expect(r.usage?.prompt_tokens).toBe(prompt().length)
  })

  it('streamed, each choice\'s chunks carry its index and concatenate to its whole text', async () => {
    const body = { model: model(), messages, max_tokens: 8, temperature: 1, seed: 8, n: 2 }
    const whole = await client.chat.completions.create(body)
    const stream = await client.chat.completions.create({ ...body, stream: true })
    const texts = ['', '']
    for await (const c of stream) for (const ch of c.choices) texts[ch.index] += ch.delta.content ?? ''
    expect(texts).toEqual(whole.choices.map((c) => c.message.content))
  })

  it('n 9 is a 400 from the client\'s point of view (BadRequestError naming n)', async () => {
    await expect(client.chat.completions.create({ model: model(), messages, n: 9 })).rejects.toMatchObject({ status: 400, param: 'n' })
  })
})

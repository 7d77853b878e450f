// Sampling on the llama.cpp decoder (launched in process on 127.0.0.1, driven by the official
// openai client): a seeded answer is llama.cpp's own sampler chain with the documented per-step
// seeds, equal token for token to a plain llama.cpp session (one batch, no store) driven the same
// way, cold and restored from a stored state alike, for several parameter sets; another seed gives
// another answer; greedy log-probabilities are llama.cpp's raw row; log-probabilities of a sampled
// answer are refused with a 400 naming the reason.
import { join } from 'node:path'
import OpenAI from 'openai'
import pino from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { GREEDY, logSumExp, type SamplingOptions } from '../../src/engines/decoder/sampling/index.ts'
import { LlamaCppSequenceSampler, launchLlamaCppDecoder, type LaunchedLlamaCppDecoder } from '../../src/engines/llama-cpp/decoder/index.ts'
import { LlamaCppModel } from '../../src/engines/llama-cpp/runner.ts'
import { exportGguf } from '../../src/model/gguf/index.ts'
import { cutAtEos, makeTiny, tempDir } from '../decoder-server/helpers.ts'

const BLOCK = 64
const EOS = 1
const MODEL_NAME = 'tiny-llama'
const tmp = tempDir('llama-sampling')
let decoder: LaunchedLlamaCppDecoder
let client: OpenAI
let plain: LlamaCppModel

const prompt = Array.from({ length: 150 }, (_, i) => 5 + ((i * 41 + 7 + ((i * i) % 11)) % 500))

beforeAll(async () => {
  const modelDir = await makeTiny(join(tmp.dir, 'model'))
  const gguf = join(tmp.dir, 'tiny.gguf')
  await exportGguf({ model: modelDir, out: gguf, type: 'f32' })
  const logger = pino({ level: 'warn' }, pino.destination({ dest: join(tmp.dir, 'decoder.log'), sync: true }))
  decoder = await launchLlamaCppDecoder({ modelDir, gguf, cacheDir: join(tmp.dir, 'cache'), blockSize: BLOCK, modelName: MODEL_NAME, port: 0, maxTokens: 64, logger })
  client = new OpenAI({ baseURL: `${decoder.server.url}/v1`, apiKey: 'unused', maxRetries: 0 })
  plain = await LlamaCppModel.load(gguf)
})

afterAll(async () => {
  await decoder?.close()
  await plain?.dispose()
  tmp.remove()
})

/** A plain llama.cpp session (the whole prompt in one batch, no store) sampled step by step as the decoder documents it. */
async function plainSampled (o: Partial<SamplingOptions>, seed: number, k: number): Promise<number[]> {
  const sampler = new LlamaCppSequenceSampler({ ...GREEDY, ...o }, seed, 0)
  const s = await plain.session({ contextSize: prompt.length + k + 4 })
  try {
    let step = await s.evaluate(prompt, 1, sampler.next())
    const out: number[] = []
    for (let i = 0; i < k; i++) {
      const next = sampler.pick(step).token
      out.push(next)
      if (next === EOS) break
      step = await s.evaluate([next], 1, sampler.next())
    }
    return cutAtEos(out, EOS)
  } finally {
    await s.dispose()
  }
}

async function served (body: Record<string, unknown>): Promise<{ ids: number[], cached: number }> {
  const r = await client.completions.create({ model: MODEL_NAME, prompt, max_tokens: 12, return_token_ids: true, ...body } as unknown as OpenAI.CompletionCreateParamsNonStreaming)
  return { ids: cutAtEos((r.choices[0] as unknown as { token_ids: number[] }).token_ids, EOS), cached: r.usage?.prompt_tokens_details?.cached_tokens ?? -1 }
}

const PARAMETER_SETS: Array<[string, Record<string, number>, Partial<SamplingOptions>]> = [
  ['temperature 1.4, top_p 0.9', { temperature: 1.4, top_p: 0.9 }, { temperature: 1.4, topP: 0.9 }],
  ['temperature 0.9, top_k 30, min_p 0.02', { temperature: 0.9, top_k: 30, min_p: 0.02 }, { temperature: 0.9, topK: 30, minP: 0.02 }],
  ['temperature 1.2, presence 0.5 and frequency 1 penalties', { temperature: 1.2, presence_penalty: 0.5, frequency_penalty: 1 }, { temperature: 1.2, presencePenalty: 0.5, frequencyPenalty: 1 }],
  ['greedy with a frequency penalty (llama.cpp\'s chain)', { temperature: 0, frequency_penalty: 2 }, { frequencyPenalty: 2 }],
]

describe('seeded sampling on the llama.cpp decoder', () => {
  it.each(PARAMETER_SETS)('%s: the served ids equal a plain llama.cpp session\'s, cold and restored', async (_what, body, o) => {
    const seed = 77
    const want = await plainSampled(o, seed, 12)
    const first = await served({ ...body, seed })
    expect(first.ids).toEqual(want)
    // The second time the prompt's 128-token boundary is restored from the store: the same answer.
    const again = await served({ ...body, seed })
    expect(again.cached).toBe(128)
    expect(again.ids).toEqual(want)
  })

  it('other seeds give other answers; temperature 1 with top_k 1 is the greedy answer', async () => {
    const answers = new Set<string>()
    for (const seed of [1, 2, 3, 4]) answers.add(JSON.stringify((await served({ temperature: 1, seed })).ids))
    expect(answers.size).toBeGreaterThan(1)
    expect((await served({ temperature: 1, top_k: 1, seed: 5 })).ids).toEqual((await served({})).ids)
  })

  it('reports the seed it drew, and that seed repeats the answer', async () => {
    const r = await client.completions.create({ model: MODEL_NAME, prompt, max_tokens: 8, temperature: 1, return_token_ids: true } as unknown as OpenAI.CompletionCreateParamsNonStreaming)
    const seed = (r as unknown as { pd_decoder?: { seed?: number } }).pd_decoder?.seed
    expect(Number.isSafeInteger(seed)).toBe(true)
    expect((await served({ temperature: 1, seed, max_tokens: 8 })).ids).toEqual(cutAtEos((r.choices[0] as unknown as { token_ids: number[] }).token_ids, EOS))
  })
})

describe('log-probabilities on the llama.cpp decoder', () => {
  it('greedy: the log-softmax of llama.cpp\'s raw logits, with the top alternatives', async () => {
    const r = await client.completions.create({ model: MODEL_NAME, prompt, max_tokens: 4, logprobs: 2, return_token_ids: true } as unknown as OpenAI.CompletionCreateParamsNonStreaming)
    const ids = cutAtEos((r.choices[0] as unknown as { token_ids: number[] }).token_ids, EOS)
    const lp = r.choices[0].logprobs
    const s = await plain.session({ contextSize: prompt.length + 8 })
    try {
      let logits = (await s.evaluate(prompt, 1)).logits
      for (const [i, id] of ids.entries()) {
        expect(lp?.token_logprobs?.[i]).toBe(logits[id] - logSumExp(logits))
        expect(Object.keys(lp?.top_logprobs?.[i] ?? {}).length).toBeGreaterThanOrEqual(1)
        logits = (await s.evaluate([id], 1)).logits
      }
    } finally {
      await s.dispose()
    }
  })

  it('with temperature above 0 (or penalties) they are refused: a 400 naming logprobs and why', async () => {
    for (const extra of [{ temperature: 0.8 }, { frequency_penalty: 1 }]) {
      const e = await client.chat.completions.create({ model: MODEL_NAME, messages: [{ role: 'user', content: 'hi' }], logprobs: true, ...extra }).then(() => undefined, (err: unknown) => err)
      expect(e).toBeInstanceOf(OpenAI.BadRequestError)
      expect(e).toMatchObject({ status: 400, param: 'logprobs', code: 'unsupported_value' })
      expect((e as Error).message).toMatch(/only for greedy decoding.*node-llama-cpp does not return the model's raw distribution/)
    }
  })
})

// Seeded sampling, bridged vs native, on a running embedded stack: the same chat request with
// sampling parameters through the front door (bridged: the decoder restores the bridged blocks)
// and to a second decoder of the same kind with an empty store (native); the sampled token ids
// must be equal, token for token. One home for the e2e suite (suites/stack/sampling.test.ts, one
// parameter set per decoder kind) and the protocol (protocols/sampling.mjs, every set, more prompts).
import OpenAI from 'openai'
import type { Tokenizer } from '../../src/model/tokenizer/index.ts'
import { buildDemoPrompt } from '../../src/stack/demo/prompt.ts'

/** What one request's answer is compared by. */
export interface SampledAnswer {
  ids: number[]
  text: string
  /** The X-PD-Bridge header (front door only). */
  verdict: string | null
  cached: number
  /** The seed the decoder sampled with (pd_decoder.seed): the request's, or the one it drew. */
  seed: number | undefined
}

/** A named set of OpenAI sampling parameters. */
export interface ParameterSet {
  name: string
  params: Record<string, number>
}

/**
 * The sets the protocol runs. The first draws through every filter and penalty at once, so the
 * suite's one set per kind still goes through the whole sampler chain; the others each stress a part.
 */
export const PARAMETER_SETS: ParameterSet[] = [
  { name: 'every parameter: temperature 1.2, top_p 0.9, top_k 40, min_p 0.02, presence 0.4, frequency 0.8, seed 4242', params: { temperature: 1.2, top_p: 0.9, top_k: 40, min_p: 0.02, presence_penalty: 0.4, frequency_penalty: 0.8, seed: 4242 } },
  { name: 'temperature 1, seed 7', params: { temperature: 1, seed: 7 } },
  { name: 'temperature 1.3, top_p 0.85, top_k 40, seed 1234', params: { temperature: 1.3, top_p: 0.85, top_k: 40, seed: 1234 } },
  { name: 'temperature 0.9, min_p 0.05, presence 0.4, frequency 0.8, seed 99', params: { temperature: 0.9, min_p: 0.05, presence_penalty: 0.4, frequency_penalty: 0.8, seed: 99 } },
  { name: 'temperature 2, top_k 3, seed 31337', params: { temperature: 2, top_k: 3, seed: 31337 } },
]

/** One chat completion with `return_token_ids`, through the official openai client. */
export async function askSampled (url: string, body: Record<string, unknown>, timeoutMs: number): Promise<SampledAnswer> {
  const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: process.env.PD_API_KEY || 'unused', maxRetries: 0, timeout: timeoutMs })
  const { data, response } = await client.chat.completions.create({ ...body, return_token_ids: true } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming).withResponse()
  return {
    ids: (data.choices[0] as unknown as { token_ids: number[] }).token_ids,
    text: data.choices[0].message.content ?? '',
    verdict: response.headers.get('x-pd-bridge'),
    cached: data.usage?.prompt_tokens_details?.cached_tokens ?? -1,
    seed: (data as unknown as { pd_decoder?: { seed?: number } }).pd_decoder?.seed,
  }
}

/** Where the two legs go and what they send. */
export interface SamplingTarget {
  frontUrl: string
  nativeUrl: string
  modelName: string
  tokenizer: Tokenizer
  timeoutMs: number
}

/** One bridged/native pair and what differs between them (empty when the case holds). */
export interface SamplingCase {
  bridged: SampledAnswer
  native: SampledAnswer
  problems: string[]
}

/**
 * A fresh prompt of about `tokens` tokens (seed `promptSeed`) with `params`, bridged and native.
 * The case holds when the bridged leg's verdict is complete with `bridgedTokens` restored (any
 * tokens at all when undefined), the native leg restored nothing, the ids and text are equal, there is more than one token to compare, and the
 * decoder reports the request's seed.
 */
export async function bridgedVsNative (t: SamplingTarget, params: Record<string, number>, promptSeed: number, tokens: number, maxTokens: number, bridgedTokens: number | undefined): Promise<SamplingCase> {
  const prompt = buildDemoPrompt(t.tokenizer, tokens, promptSeed)
  const body = { model: t.modelName, messages: prompt.messages, max_tokens: maxTokens, ...params }
  const bridged = await askSampled(t.frontUrl, body, t.timeoutMs)
  const native = await askSampled(t.nativeUrl, body, t.timeoutMs)
  const problems: string[] = []
  if (bridged.verdict !== 'complete') problems.push(`bridged verdict ${String(bridged.verdict)}, expected complete`)
  if (bridgedTokens === undefined ? bridged.cached <= 0 : bridged.cached !== bridgedTokens) problems.push(`bridged cached_tokens ${bridged.cached}, expected ${bridgedTokens ?? 'some'}`)
  if (native.cached !== 0) problems.push(`native cached_tokens ${native.cached}, expected 0`)
  if (JSON.stringify(bridged.ids) !== JSON.stringify(native.ids)) problems.push(`token ids differ: bridged ${JSON.stringify(bridged.ids)}, native ${JSON.stringify(native.ids)}`)
  else if (bridged.text !== native.text) problems.push('same ids but the texts differ')
  // More than an end-of-sentence token: there is an answer to compare.
  if (bridged.ids.length < 2) problems.push(`only ${bridged.ids.length} token(s) to compare`)
  if (params.seed !== undefined && bridged.seed !== params.seed) problems.push(`pd_decoder.seed ${String(bridged.seed)}, expected ${params.seed}`)
  return { bridged, native, problems }
}

/**
 * Without a seed: the front door returns the seed the decoder drew, and that seed, sent to the
 * native decoder, repeats the answer.
 */
export async function drawnSeedRepeats (t: SamplingTarget, promptSeed: number, tokens: number, maxTokens: number): Promise<SamplingCase> {
  const prompt = buildDemoPrompt(t.tokenizer, tokens, promptSeed)
  const body = { model: t.modelName, messages: prompt.messages, max_tokens: maxTokens, temperature: 1.1 }
  const bridged = await askSampled(t.frontUrl, body, t.timeoutMs)
  const problems: string[] = []
  if (!Number.isSafeInteger(bridged.seed)) return { bridged, native: bridged, problems: [`no drawn seed in pd_decoder.seed: ${String(bridged.seed)}`] }
  const native = await askSampled(t.nativeUrl, { ...body, seed: bridged.seed }, t.timeoutMs)
  if (JSON.stringify(bridged.ids) !== JSON.stringify(native.ids)) problems.push(`the drawn seed ${String(bridged.seed)} does not repeat the answer: ${JSON.stringify(bridged.ids)} vs ${JSON.stringify(native.ids)}`)
  return { bridged, native, problems }
}

// `pd-bridge decoder` as a real child process on the tiny checkpoint, driven by the official openai
// client: answers equal DeepseekV4Engine.greedy in process, streamed and whole; a repeated long
// prompt is served from the prefix cache (cached_tokens 512 with 256-token blocks) with the same
// answer; a rescan makes blocks another process wrote visible; four requests at once run batched and
// all answer correctly; /v1/models and /health.
import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DecoderPrefixCache } from '../../src/decode/prefix-cache/index.ts'
import { DeepseekV4Engine } from '../../src/model/engine/index.ts'
import { renderChat, type ChatMessage } from '../../src/model/tokenizer/index.ts'
import { cutAtEos, makeTiny, startDecoderChild, tempDir, tinyTokenizer, type DecoderChild } from './helpers.ts'

const tmp = tempDir('decoder-openai')
const tokenizer = tinyTokenizer()
const EOS = 1
const BLOCK = 256
let engine: DeepseekV4Engine
let server: DecoderChild
let client: OpenAI
let modelDir: string

beforeAll(async () => {
  modelDir = await makeTiny(`${tmp.dir}/model`)
  ;[server, engine] = await Promise.all([
    startDecoderChild(['--model', modelDir, '--cache-dir', `${tmp.dir}/cache`, '--block-size', String(BLOCK), '--max-tokens', '64', '--max-body-bytes', '100000'], `${tmp.dir}/decoder.log`),
    DeepseekV4Engine.load(modelDir, 'decoder'),
  ])
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 })
})

afterAll(async () => {
  await server?.stop()
  tmp.remove()
})

/** Extra fields the openai types do not know (vLLM's return_token_ids), sent through as they are. */
type WithIds<T> = T & { return_token_ids?: boolean }
interface IdsChoice { token_ids: number[] }
interface IdsBody { prompt_token_ids: number[] }

function chatTokens (messages: ChatMessage[]): number[] {
  return tokenizer.encode(renderChat(messages, true))
}

function expectedIds (prompt: number[], k: number): number[] {
  return cutAtEos(engine.greedy(prompt, k), EOS)
}

function textOf (ids: number[]): string {
  return tokenizer.decode(ids, { skipSpecialTokens: true })
}

const hello: ChatMessage[] = [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Tell me about the sea.' }]

async function health (): Promise<Record<string, any>> {
  return await (await fetch(`${server.url}/health`)).json() as Record<string, any>
}

describe('chat completions, whole', () => {
  it('answers with the engine\'s greedy tokens, OpenAI\'s shape, usage and X-Cached-Tokens', async () => {
    const prompt = chatTokens(hello)
    const { data, response } = await client.chat.completions.create({
      model: server.ready.model as string, messages: hello, max_tokens: 20, return_token_ids: true,
    } as WithIds<OpenAI.ChatCompletionCreateParamsNonStreaming>).withResponse()
    const want = expectedIds(prompt, 20)
    const choice = data.choices[0]
    expect((choice as unknown as IdsChoice).token_ids).toEqual(want)
    expect((data as unknown as IdsBody).prompt_token_ids).toEqual(prompt)
    expect(choice.message).toMatchObject({ role: 'assistant', content: textOf(want) })
    expect(choice.finish_reason).toBe(want.length < 20 ? 'stop' : 'length')
    // The default --model-name is the model directory: without the key it is shown by its name.
    expect(data).toMatchObject({ object: 'chat.completion', model: '<model>' })
    expect(data.id).toMatch(/^chatcmpl-[0-9a-f]{32}$/)
    expect(data.usage).toEqual({ prompt_tokens: prompt.length, completion_tokens: want.length, total_tokens: prompt.length + want.length, prompt_tokens_details: { cached_tokens: 0 } })
    expect(response.headers.get('x-cached-tokens')).toBe('0')
  })

  it('max_completion_tokens limits the answer; without a model field the served one is used', async () => {
    const r = await client.chat.completions.create({ messages: hello, max_completion_tokens: 3 } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming)
    const want = expectedIds(chatTokens(hello), 3)
    expect(r.choices[0].message.content).toBe(textOf(want))
    expect(r.usage?.completion_tokens).toBe(want.length)
  })
})

describe('chat completions, streamed', () => {
  it('the deltas concatenate to the whole answer; role first, finish chunk, usage chunk last', async () => {
    const messages: ChatMessage[] = [{ role: 'user', content: 'Stream me something.' }]
    const prompt = chatTokens(messages)
    const want = expectedIds(prompt, 24)
    const { data: stream, response } = await client.chat.completions.create({
      model: server.ready.model as string, messages, max_tokens: 24, stream: true, stream_options: { include_usage: true },
    }).withResponse()
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/)
    expect(response.headers.get('x-cached-tokens')).toBe('0')
    const chunks: OpenAI.ChatCompletionChunk[] = []
    for await (const chunk of stream) chunks.push(chunk)
    expect(chunks[0].choices[0].delta).toEqual({ role: 'assistant', content: '' })
    const content = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')
    expect(content).toBe(textOf(want))
    const finish = chunks.filter((c) => c.choices[0]?.finish_reason != null)
    expect(finish.map((c) => c.choices[0].finish_reason)).toEqual([want.length < 24 ? 'stop' : 'length'])
    const last = chunks[chunks.length - 1]
    expect(last.choices).toEqual([])
    expect(last.usage).toEqual({ prompt_tokens: prompt.length, completion_tokens: want.length, total_tokens: prompt.length + want.length, prompt_tokens_details: { cached_tokens: 0 } })
    // The decoder's own clock rides on the usage chunk; the openai client passes the field through.
    const timings = (last as unknown as { pd_decoder: { prefill_ms: number, decode_ms: number } }).pd_decoder
    expect(Object.keys(timings).sort()).toEqual(['decode_ms', 'prefill_ms'])
    expect(Number.isInteger(timings.prefill_ms) && timings.prefill_ms >= 0).toBe(true)
    expect(Number.isInteger(timings.decode_ms) && timings.decode_ms >= 0).toBe(true)
    for (const c of chunks.slice(0, -1)) expect(c).not.toHaveProperty('pd_decoder')
    for (const c of chunks.slice(0, -1)) expect(c.usage).toBeNull()
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1)
    expect(chunks.every((c) => c.object === 'chat.completion.chunk')).toBe(true)
  })
})

describe('completions', () => {
  it('a text prompt (bos added) answers the greedy tokens, whole and streamed alike', async () => {
    const text = 'Once upon a time'
    const prompt = [0, ...tokenizer.encode(text)]
    const want = expectedIds(prompt, 16)
    const whole = await client.completions.create({ model: server.ready.model as string, prompt: text, max_tokens: 16, return_token_ids: true } as WithIds<OpenAI.CompletionCreateParamsNonStreaming>)
    expect((whole.choices[0] as unknown as IdsChoice).token_ids).toEqual(want)
    expect(whole.choices[0].text).toBe(textOf(want))
    expect(whole.object).toBe('text_completion')
    expect(whole.usage?.prompt_tokens).toBe(prompt.length)
    const stream = await client.completions.create({ model: server.ready.model as string, prompt: text, max_tokens: 16, stream: true })
    let streamed = ''
    const reasons: string[] = []
    for await (const chunk of stream) {
      streamed += chunk.choices[0]?.text ?? ''
      if (chunk.choices[0]?.finish_reason) reasons.push(chunk.choices[0].finish_reason)
    }
    expect(streamed).toBe(whole.choices[0].text)
    expect(reasons).toEqual([whole.choices[0].finish_reason])
  })

  it('a token-id prompt is used as given', async () => {
    const prompt = [0, 5, 77, 300, 12, 9]
    const r = await client.completions.create({ model: server.ready.model as string, prompt, max_tokens: 10, return_token_ids: true } as WithIds<OpenAI.CompletionCreateParamsNonStreaming>)
    expect((r.choices[0] as unknown as IdsChoice).token_ids).toEqual(expectedIds(prompt, 10))
  })

  it('stops at the end-of-sentence token (counted, not in the text) unless ignore_eos', async () => {
    // Found by search: the tiny model's greedy continuation of this prompt emits eos (id 1) at step 22.
    const prompt = [0, 400, 429, 458, 487, 4, 33]
    const all = engine.greedy(prompt, 40)
    expect(all.indexOf(EOS)).toBe(21)
    const r = await client.completions.create({ model: server.ready.model as string, prompt, max_tokens: 40, return_token_ids: true } as WithIds<OpenAI.CompletionCreateParamsNonStreaming>)
    expect((r.choices[0] as unknown as IdsChoice).token_ids).toEqual(all.slice(0, 22))
    expect(r.choices[0]).toMatchObject({ finish_reason: 'stop', text: textOf(all.slice(0, 21)) })
    expect(r.usage?.completion_tokens).toBe(22)
    const past = await client.completions.create({ model: server.ready.model as string, prompt, max_tokens: 40, ignore_eos: true, return_token_ids: true } as WithIds<OpenAI.CompletionCreateParamsNonStreaming>)
    expect((past.choices[0] as unknown as IdsChoice).token_ids).toEqual(all)
    expect(past.choices[0]).toMatchObject({ finish_reason: 'length', text: textOf(all) })
  })

  it('a stop string cuts the text before it, whole and streamed, finish_reason stop', async () => {
    const text = 'The lighthouse keeper said'
    const full = await client.completions.create({ model: server.ready.model as string, prompt: text, max_tokens: 30, ignore_eos: true } as OpenAI.CompletionCreateParamsNonStreaming)
    const t = full.choices[0].text
    // A two-letter stop from the middle of the answer, plain ASCII so it reads well in a failure.
    const at = Array.from({ length: t.length }, (_, i) => i).find((i) => i >= 4 && /^[a-z]{2}$/i.test(t.slice(i, i + 2)))
    expect(at, `no ASCII pair in ${JSON.stringify(t)}`).toBeDefined()
    const stop = t.slice(at!, at! + 2)
    const cut = t.slice(0, t.indexOf(stop))
    const r = await client.completions.create({ model: server.ready.model as string, prompt: text, max_tokens: 30, ignore_eos: true, stop: [stop, 'never-there'] } as OpenAI.CompletionCreateParamsNonStreaming)
    expect(r.choices[0]).toMatchObject({ text: cut, finish_reason: 'stop' })
    expect(r.usage!.completion_tokens).toBeLessThan(30)
    const stream = await client.completions.create({ model: server.ready.model as string, prompt: text, max_tokens: 30, ignore_eos: true, stop, stream: true } as OpenAI.CompletionCreateParamsStreaming)
    let streamed = ''
    for await (const chunk of stream) streamed += chunk.choices[0]?.text ?? ''
    expect(streamed).toBe(cut)
  })
})

/** A chat whose rendered prompt has between 2 and 3 blocks of tokens (not a multiple of the block size). */
function longChat (topic: string): { messages: ChatMessage[], tokens: number[] } {
  for (let n = 1; ; n++) {
    const messages: ChatMessage[] = [{ role: 'user', content: `${topic} `.repeat(n) }]
    const tokens = chatTokens(messages)
    if (tokens.length > 2 * BLOCK + 40) return { messages, tokens }
  }
}

describe('prefix cache', () => {
  it('a repeated ~600-token prompt reports cached_tokens 512 the second time and gives the same answer', async () => {
    const { messages, tokens } = longChat('The tide comes in over the grey stones of the old harbour wall.')
    expect(tokens.length).toBeGreaterThan(512)
    expect(tokens.length).toBeLessThan(768)
    const want = expectedIds(tokens, 12)
    const ask = () => client.chat.completions.create({ model: server.ready.model as string, messages, max_tokens: 12, return_token_ids: true } as WithIds<OpenAI.ChatCompletionCreateParamsNonStreaming>).withResponse()
    const first = await ask()
    expect(first.data.usage?.prompt_tokens_details?.cached_tokens).toBe(0)
    const before = await health()
    expect(before.cache.stats.writtenBlocks).toBeGreaterThanOrEqual(2)
    const second = await ask()
    expect(second.data.usage?.prompt_tokens_details?.cached_tokens).toBe(512)
    expect(second.response.headers.get('x-cached-tokens')).toBe('512')
    expect((second.data.choices[0] as unknown as IdsChoice).token_ids).toEqual(want)
    expect((first.data.choices[0] as unknown as IdsChoice).token_ids).toEqual(want)
    expect(second.data.choices[0].message.content).toBe(first.data.choices[0].message.content)
    const after = await health()
    expect(after.cache.stats.hits).toBe(before.cache.stats.hits + 1)
    expect(after.cache.stats.writtenBlocks).toBe(before.cache.stats.writtenBlocks)
  })

  it('a streamed hit carries X-Cached-Tokens and usage.prompt_tokens_details.cached_tokens too', async () => {
    const { messages, tokens } = longChat('Gulls argue over a fish on the quay.')
    await client.chat.completions.create({ model: server.ready.model as string, messages, max_tokens: 2 })
    const { data: stream, response } = await client.chat.completions.create({
      model: server.ready.model as string, messages, max_tokens: 6, stream: true, stream_options: { include_usage: true },
    }).withResponse()
    expect(response.headers.get('x-cached-tokens')).toBe('512')
    let content = ''
    let usage: OpenAI.CompletionUsage | null | undefined
    for await (const c of stream) {
      content += c.choices[0]?.delta.content ?? ''
      usage = c.usage ?? usage
    }
    expect(usage?.prompt_tokens_details?.cached_tokens).toBe(512)
    expect(content).toBe(textOf(expectedIds(tokens, 6)))
  })

  it('a cold streamed prompt says how far its prefill is, as SSE comments between blocks; the openai client skips them', async () => {
    const { messages, tokens } = longChat('Fog lifts from the estuary before noon.')
    const res = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: server.ready.model, messages, max_tokens: 4, stream: true }),
    })
    expect(res.status).toBe(200)
    const raw = await res.text()
    const comments = raw.split('\n').filter((l) => l.startsWith(':'))
    // One per finished chunk but the last: block boundaries 256 and 512 of a 2-3 block prompt.
    expect(comments).toEqual([`: prefill 256/${tokens.length}`, `: prefill 512/${tokens.length}`])
    expect(raw.indexOf(comments[1])).toBeLessThan(raw.indexOf('"content":"', raw.indexOf('"content":"') + 1))
    // The openai client reads such a stream (here a hit past 512, prefilled in one chunk) and gives the greedy text.
    const { data: stream } = await client.chat.completions.create({ model: server.ready.model as string, messages, max_tokens: 4, stream: true }).withResponse()
    let content = ''
    for await (const c of stream) content += c.choices[0]?.delta.content ?? ''
    expect(content).toBe(textOf(expectedIds(tokens, 4)))
  })

  it('POST /v1/cache/rescan indexes blocks another process wrote; the next request hits them', async () => {
    const { messages, tokens } = longChat('A ferry crosses the bay at dawn, slow and patient.')
    // This test process is "another process": it writes the decoder's blocks with its own engine.
    const writer = await DecoderPrefixCache.open({ storeRoot: `${tmp.dir}/cache`, modelName: server.ready.model as string, cfg: engine.config, profile: 'decoder', blockSize: BLOCK, log: () => {} })
    const stored = await writer.prefillAndStore(engine, tokens)
    expect(stored.storedBlocks.map((b) => b.written)).toEqual([true, true])
    const before = await health()
    const res = await fetch(`${server.url}/v1/cache/rescan`, { method: 'POST' })
    expect(res.status).toBe(200)
    const body = await res.json() as { object: string, report: { indexed: number }, cache: { blocks: number } }
    expect(body.object).toBe('cache.rescan')
    expect(body.report.indexed).toBe(before.cache.blocks + 2)
    expect(body.cache.blocks).toBe(before.cache.blocks + 2)
    const r = await client.chat.completions.create({ model: server.ready.model as string, messages, max_tokens: 8, return_token_ids: true } as WithIds<OpenAI.ChatCompletionCreateParamsNonStreaming>)
    expect(r.usage?.prompt_tokens_details?.cached_tokens).toBe(512)
    expect((r.choices[0] as unknown as IdsChoice).token_ids).toEqual(expectedIds(tokens, 8))
    const after = await health()
    // Found through the rescan's index, not through the filesystem check on a miss.
    expect(after.cache.store.foundOnDisk).toBe(before.cache.store.foundOnDisk)
    expect(after.cache.stats.writtenBlocks).toBe(before.cache.stats.writtenBlocks)
  })
})

describe('concurrency', () => {
  it('four requests at once run side by side, their decode steps batched, and each answers its own greedy tokens; /health answers meanwhile', async () => {
    const prompts = ['Alpha beta gamma', 'The river bends', 'Numbers: one two three', 'Winter light on snow']
    const served = (await health()).queue.served as number
    let finished = false
    const runs = Promise.all(prompts.map(async (p, i) => {
      const messages: ChatMessage[] = [{ role: 'user', content: p }]
      if (i % 2 === 0) {
        const r = await client.chat.completions.create({ model: server.ready.model as string, messages, max_tokens: 48, ignore_eos: true,
          return_token_ids: true } as WithIds<OpenAI.ChatCompletionCreateParamsNonStreaming>)
        return (r.choices[0] as unknown as IdsChoice).token_ids
      }
      const stream = await client.chat.completions.create({ model: server.ready.model as string, messages, max_tokens: 48, ignore_eos: true, stream: true,
        return_token_ids: true } as WithIds<OpenAI.ChatCompletionCreateParamsStreaming>)
      let ids: number[] = []
      for await (const c of stream) ids = (c.choices[0] as unknown as Partial<IdsChoice>)?.token_ids ?? ids
      return ids
    })).finally(() => { finished = true })
    // The engine yields between decode steps, so /health answers while requests run.
    let mostRunning = 0
    while (!finished) {
      mostRunning = Math.max(mostRunning, (await health()).queue.running as number)
      await new Promise((r) => setTimeout(r, 5))
    }
    const got = await runs
    expect(mostRunning).toBeGreaterThanOrEqual(2)
    expect(((await health()).batch as { maxRows: number }).maxRows).toBeGreaterThanOrEqual(2)
    expect(got).toEqual(prompts.map((p) => engine.greedy(chatTokens([{ role: 'user', content: p }]), 48)))
    expect((await health()).queue).toMatchObject({ running: 0, waiting: 0, served: served + 4 })
  })
})

describe('models and health', () => {
  it('/v1/models lists the served model; /v1/models/{id} finds it; an unknown id is a NotFoundError', async () => {
    const list = await client.models.list()
    // The served name is the model directory's path (the default): shown as <model> without the key, and both spellings are accepted.
    expect(list.data.map((m) => [m.id, m.object, m.owned_by])).toEqual([['<model>', 'model', 'pd-bridge']])
    expect((await client.models.retrieve('<model>')).id).toBe('<model>')
    // A path as {id} needs an encoded slash (%2F), an ambiguous spelling every port refuses (docs/front-door.md).
    await expect(client.models.retrieve(server.ready.model as string)).rejects.toMatchObject({ status: 400, code: 'invalid_path' })
    await expect(client.models.retrieve('nope')).rejects.toBeInstanceOf(OpenAI.NotFoundError)
  })

  it('/health names the model, profile, geometry, limits, queue and store', async () => {
    const h = await health()
    expect(h).toMatchObject({
      status: 'ok', model: '<model>', model_dir: '<model>', profile: 'decoder', geometry_fingerprint: server.ready.geometry_fingerprint,
      max_position_embeddings: 32768, limits: { max_tokens: 64, max_body_bytes: 100000, max_queue: 16 }, queue: { running: 0, waiting: 0, max_queue: 16 },
      cache: { dir: '<cacheDir>', block_size: BLOCK },
    })
    expect(h.geometry_fingerprint).toMatch(/^[0-9a-f]{64}$/)
    expect(h.cache.blocks).toBeGreaterThan(0)
  })

  it('each generation is one JSON log line with its token counts', async () => {
    const lines = server.log().filter((l) => l.event === 'generation')
    expect(lines.length).toBeGreaterThan(5)
    expect(lines.some((l) => l.cached_tokens === 512)).toBe(true)
    for (const l of lines) expect(Object.keys(l)).toEqual(expect.arrayContaining(['id', 'prompt_tokens', 'cached_tokens', 'completion_tokens', 'finish_reason']))
  })
})

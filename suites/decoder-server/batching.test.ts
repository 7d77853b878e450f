// `pd-bridge decoder` batching concurrent requests, as a real child process: at most --max-batch run
// at once and the rest wait (429 with Retry-After past --max-queue); the memory budget holds a
// request back until the running ones leave room, and refuses one that could never fit; a client
// that goes away leaves the batch while the others go on to their own greedy answers.
import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sequenceBytes } from '../../src/engines/decoder/memory-budget.ts'
import { DeepseekV4Engine } from '../../src/model/engine/index.ts'
import { makeTiny, startDecoderChild, tempDir, waitFor, type DecoderChild } from './helpers.ts'

const tmp = tempDir('decoder-batching')
const LONG = 4000
// A budget that holds one long request (prompt of 4 tokens + 4000) but not two.
let budget: number
let engine: DeepseekV4Engine
let server: DecoderChild
let client: OpenAI

beforeAll(async () => {
  const dir = await makeTiny(`${tmp.dir}/model`)
  engine = await DeepseekV4Engine.load(dir, 'decoder')
  budget = Math.floor(sequenceBytes(engine.config, 4, LONG) * 1.5)
  server = await startDecoderChild(['--model', dir, '--cache-dir', `${tmp.dir}/cache`, '--model-name', 'tiny', '--max-batch', '3', '--max-queue', '1',
    '--batch-memory-bytes', String(budget), '--max-tokens', String(2 * LONG)], `${tmp.dir}/decoder.log`)
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 })
})

afterAll(async () => {
  await server?.stop()
  tmp.remove()
})

async function health (): Promise<Record<string, any>> {
  return await (await fetch(`${server.url}/health`)).json() as Record<string, any>
}

/** A streamed completion of `prompt` ids, started and read up to its first text. */
async function startStream (prompt: number[], maxTokens: number): Promise<AsyncIterator<OpenAI.Completion>> {
  const stream = await client.completions.create({ model: 'tiny', prompt, max_tokens: maxTokens, ignore_eos: true, stream: true } as OpenAI.CompletionCreateParamsStreaming)
  const it = stream[Symbol.asyncIterator]()
  for (;;) {
    const { value, done } = await it.next()
    if (done) throw new Error('the stream ended before any text')
    if ((value.choices[0]?.text ?? '') !== '') return it
  }
}

async function idsOf (prompt: number[], maxTokens: number): Promise<number[]> {
  const r = await client.completions.create({ model: 'tiny', prompt, max_tokens: maxTokens, ignore_eos: true, return_token_ids: true } as OpenAI.CompletionCreateParamsNonStreaming)
  return (r.choices[0] as unknown as { token_ids: number[] }).token_ids
}

describe('admission', () => {
  it('/health shows the batch limits and the budget', async () => {
    const h = await health()
    expect(h.limits).toMatchObject({ max_batch: 3, batch_memory_bytes: budget, max_queue: 1 })
    expect(h.queue).toMatchObject({ running: 0, waiting: 0, slots: 3, used_bytes: 0, budget_bytes: budget })
    expect(h.batch).toMatchObject({ seats: 0 })
  })

  it('a request that alone exceeds the budget is a 400 that says so, at once', async () => {
    const err = await client.completions.create({ model: 'tiny', prompt: [5, 6, 7, 8], max_tokens: 2 * LONG }).then(() => undefined, (e: unknown) => e)
    expect(err).toBeInstanceOf(OpenAI.BadRequestError)
    expect((err as InstanceType<typeof OpenAI.BadRequestError>).error).toMatchObject({ code: 'memory_budget_exceeded', param: 'max_tokens', message: expect.stringMatching(/--batch-memory-bytes/) })
    expect((await health()).queue.too_large).toBe(1)
  })

  it('the budget holds a second long request back; short ones run beside the first; past --max-queue a 429', async () => {
    const first = await startStream([5, 6, 7, 8], LONG)
    expect((await health()).queue).toMatchObject({ running: 1, waiting: 0 })
    // Fits a slot but not the budget: waits.
    const second = startStream([9, 10, 11, 12], LONG)
    await waitFor(async () => (await health()).queue.waiting === 1 ? true : undefined)
    // The queue (1) is full now: a third is refused even though a slot is free.
    const refused = await fetch(`${server.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt: [1, 2], max_tokens: 2 }) })
    expect(refused.status).toBe(429)
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('queue_full')
    // The first leaves: the second gets its turn.
    await first.return?.()
    const it2 = await second
    expect((await health()).queue).toMatchObject({ running: 1, waiting: 0 })
    // Short requests run beside it, batched, and answer their solo greedy tokens.
    const prompts = [[20, 21, 22], [30, 31, 32, 33, 34], [40]]
    const got = await Promise.all(prompts.slice(0, 2).map((p) => idsOf(p, 12)))
    expect(got).toEqual(prompts.slice(0, 2).map((p) => engine.greedy(p, 12)))
    await it2.return?.()
    await waitFor(async () => (await health()).queue.running === 0 ? true : undefined)
    expect((await health()).batch.maxRows).toBeGreaterThanOrEqual(2)
  })

  it('a cancelled stream leaves the batch; the others finish with their greedy answers', async () => {
    const gone = await startStream([50, 51, 52], 200)
    const others = Promise.all([[60, 61], [70, 71, 72, 73]].map((p) => idsOf(p, 16)))
    await gone.return?.()
    expect(await others).toEqual([[60, 61], [70, 71, 72, 73]].map((p) => engine.greedy(p, 16)))
    await waitFor(async () => (await health()).batch.seats === 0 ? true : undefined)
    const cancelled = server.log().filter((l) => l.event === 'generation' && l.finish_reason === 'cancelled')
    expect(cancelled.length).toBeGreaterThanOrEqual(2)
  })
})

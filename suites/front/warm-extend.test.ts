// Warm-extended prompts through the whole stack (docs/warm-extend.md): the front door finds the
// decoder's store holding blocks for a prefix of a long prompt, sends the prefill engine the
// decoder's cache at the last stored boundary (a carry), and the engine prefills only the tail.
// Compared with the decoder alone (a second decoder that prefills everything natively on its own
// store): the same greedy tokens, and every block of the store identical to the decoder alone's.
// X-PD-Bridge says how many tokens were bridged and from which boundary.
import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { compareBlockDirs } from '../../src/decode/store/index.ts'
import { BLOCK, frontConfig, makeArtifacts, startFront, startStack, tempDir, textPrompt, type Artifacts, type Proc, type Stack } from './stack.ts'
import { HANG_LIMIT_MS } from '../support/hang-limit.ts'

const tmp = tempDir('front-warm')
let art: Artifacts
let stack: Stack
let front: Awaited<ReturnType<typeof startFront>>

beforeAll(async () => {
  art = await makeArtifacts(tmp.dir)
  stack = await startStack(tmp.dir, art)
  front = await startFront(tmp.dir, 'warm', frontConfig(stack))
})

afterAll(async () => {
  await front?.stop()
  await stack?.stop()
  tmp.remove()
})

interface Answer { verdict: string | null, ids: number[], cached: number | undefined, pd: Record<string, any> }

async function complete (proc: Proc, prompt: number[]): Promise<Answer> {
  const client = new OpenAI({ baseURL: `${proc.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: HANG_LIMIT_MS })
  const body = { model: stack.modelName, prompt, max_tokens: 8, return_token_ids: true }
  const { data, response } = await client.completions.create(body as OpenAI.CompletionCreateParamsNonStreaming & { return_token_ids: boolean }).withResponse()
  const d = data as unknown as { choices: Array<{ token_ids: number[] }>, usage: OpenAI.CompletionUsage, pd_bridge: Record<string, any> }
  return { verdict: response.headers.get('x-pd-bridge'), ids: d.choices[0].token_ids, cached: d.usage.prompt_tokens_details?.cached_tokens, pd: d.pd_bridge }
}

describe('a prompt that grew past what the decoder has stored', () => {
  it('is bridged from the last stored boundary: only the tail prefilled, the decoder alone\'s tokens, every block identical to the decoder alone\'s', async () => {
    const first = textPrompt(art.tokenizer, 301, 700).ids
    const grown = [...first, ...textPrompt(art.tokenizer, 302, 800).ids.slice(1, 1 + 1450 - first.length)]
    expect(first.length).toBeLessThan(768)
    expect(grown.length).toBeGreaterThan(5 * BLOCK + 1)
    expect(grown.length).toBeLessThan(6 * BLOCK)

    const a = await complete(front, first)
    expect(a.verdict).toBe('complete')
    expect(a.pd.bridged_tokens).toBe(2 * BLOCK)
    expect(a.pd.resumed_from).toBeUndefined()

    const b = await complete(front, grown)
    expect(b.verdict).toBe(`complete (warm: ${3 * BLOCK} tokens bridged from boundary ${2 * BLOCK})`)
    expect(b.pd).toMatchObject({ verdict: b.verdict, route: 'bridge', stored_tokens_before: 2 * BLOCK, resumed_from: 2 * BLOCK, bridged_tokens: 3 * BLOCK, cached_tokens: 5 * BLOCK })
    expect(b.pd.warm_extend_declined).toBeUndefined()
    expect(b.pd.blocks).toEqual({ bridged: 3, written: 3, reused: 0 })
    expect(b.pd.timings_ms.carry).toBeGreaterThanOrEqual(0)
    expect(b.pd.bytes.carry).toBeGreaterThan(0)
    // The capture held only the tail's: the engine was asked for 1280 tokens and prefilled 768 of them.
    expect(b.pd.capture).toMatchObject({ state: 'done', token_count: 5 * BLOCK, sealed_length: 5 * BLOCK })
    expect(b.cached).toBe(5 * BLOCK)
    const started = stack.engine.output().split('\n').filter((l) => l.includes('"event":"prefill-end"')).map((l) => JSON.parse(l))
    expect(started.at(-1)).toMatchObject({ state: 'done', token_count: 5 * BLOCK, start_token: 2 * BLOCK })
    expect(readdirSync(join(stack.captureRoot, '.carry'))).toEqual([])

    // The decoder alone: the same prompts, prefilled natively on its own store.
    const refA = await complete(stack.reference, first)
    const refB = await complete(stack.reference, grown)
    expect(a.ids).toEqual(refA.ids)
    expect(b.ids).toEqual(refB.ids)
    const verdict = await compareBlockDirs(stack.cacheDir, join(stack.dir, 'reference-cache'))
    expect(verdict.blocks.flatMap((x) => x.differences)).toEqual([])
    expect(`${verdict.identical}/${verdict.total}`).toBe('5/5')
  })
})

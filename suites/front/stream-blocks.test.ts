// Blocks written while the engine runs, through the real stack (engine with 256-token chunks,
// share, decoder, front doors with capture.streamBlocks on): a cold prompt of three chunks is bridged
// complete from the share's segments and from the local mount's, its answer is the decoder alone's,
// and the record carries the streamed stage timings. An engine killed after its first segment is
// declined with the engine's reason; the blocks the verdict says were written are exactly what the
// decoder then restores, and the store holds nothing half-written.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { ChatMessage } from '../../src/model/tokenizer/index.ts'
import { HANG_LIMIT_MS } from '../support/hang-limit.ts'
import {
  BLOCK, chatPrompt, frontConfig, makeArtifacts, startFront, startStack, storeFiles, tempDir, waitFor, type Artifacts, type Proc, type Stack,
} from './stack.ts'

const tmp = tempDir('front-stream')
let art: Artifacts
let stack: Stack
const fronts: Record<string, Proc> = {}

beforeAll(async () => {
  art = await makeArtifacts(tmp.dir)
  stack = await startStack(tmp.dir, art)
  const shared = frontConfig(stack, { capture: { streamBlocks: true } })
  const local = frontConfig(stack, { capture: { streamBlocks: true, dir: stack.captureRoot } })
  delete (local as { share?: unknown }).share
  fronts.share = await startFront(tmp.dir, 'share', shared)
  fronts.local = await startFront(tmp.dir, 'local', local)
  fronts.pair = await startFront(tmp.dir, 'pair', frontConfig(stack, { capture: { streamBlocks: true }, queue: { concurrentBridges: 2 } }))
})

afterAll(async () => {
  await Promise.all(Object.values(fronts).map(async (f) => await f.stop()))
  await stack?.stop()
  tmp.remove()
})

interface Answer { verdict: string | null, ids: number[], cached: number, pd: Record<string, any> }

async function chat (url: string, messages: ChatMessage[]): Promise<Answer> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: stack.modelName, messages, max_tokens: 6, return_token_ids: true }),
  })
  const body = await res.json() as { choices: Array<{ token_ids: number[] }>, usage: { prompt_tokens_details?: { cached_tokens?: number } }, pd_bridge: Record<string, any> }
  return { verdict: res.headers.get('x-pd-bridge'), ids: body.choices[0].token_ids, cached: body.usage.prompt_tokens_details?.cached_tokens ?? 0, pd: body.pd_bridge }
}

describe('blocks written while the engine runs', () => {
  it.each(['share', 'local'])('from the %s: complete, the decoder alone\'s tokens, streamed timings recorded', async (name) => {
    const p = chatPrompt(art.tokenizer, name === 'share' ? 301 : 302, 800)
    const blocks = Math.floor((p.ids.length - 1) / BLOCK)
    const a = await chat(fronts[name].url, p.messages)
    const alone = await chat(stack.reference.url, p.messages)
    expect(a.verdict).toBe('complete')
    expect(a.cached).toBe(blocks * BLOCK)
    expect(a.ids).toEqual(alone.ids)
    expect(a.pd.blocks).toEqual({ bridged: blocks, written: blocks, reused: 0 })
    expect(a.pd.stream.blocks_before_seal).toBeGreaterThanOrEqual(0)
    expect(a.pd.stream.blocks_before_seal).toBeLessThanOrEqual(blocks)
    const t = a.pd.timings_ms
    for (const stage of ['submit', 'capture', 'engine_prefill', 'first_block', 'after_seal', 'block_stage', 'assembly', 'block_write', 'bridge_total']) expect(t[stage], stage).toBeGreaterThanOrEqual(0)
    // The first block was put inside the capture stage, and what followed the seal is part of it.
    expect(t.first_block).toBeLessThanOrEqual(t.capture)
    expect(t.after_seal).toBeLessThanOrEqual(t.capture)
    // Our engine writes its segments on its own thread (its manifest's segmentWrite); it has no writer thread.
    expect(t.engine_segment_write).toBeGreaterThan(0)
    expect(t.segment_writer).toBeUndefined()
    console.log(`${name}: ${a.pd.stream.blocks_before_seal} of ${blocks} blocks before the seal; timings ${JSON.stringify(t)}`)
  })

  it('the engine killed after its first segment: declined with its reason; what the verdict says was written is what the decoder restores', async () => {
    const p = chatPrompt(art.tokenizer, 303, 800)
    const pending = chat(fronts.share.url, p.messages)
    const id = await waitFor(async () => (await (await fetch(`${stack.engine.url}/health`)).json() as { running: string | null }).running ?? undefined, HANG_LIMIT_MS, 'the engine running the capture')
    await waitFor(async () => {
      try { return (JSON.parse(readFileSync(join(stack.captureRoot, id, 'segments.json'), 'utf8')).segments.length as number) > 0 ? true : undefined }
      catch { return undefined }
    }, HANG_LIMIT_MS, 'the first segment published')
    stack.engine.child.kill('SIGKILL')
    const a = await pending
    expect(a.verdict).toMatch(/^declined: prefill engine unreachable during the prefill/)
    const written = Number(/(\d+) whole blocks written before it stopped/.exec(a.pd.verdict)?.[1] ?? 0)
    expect(a.cached).toBe(written * BLOCK)
    expect(a.ids).toEqual((await chat(stack.reference.url, p.messages)).ids)
    expect(storeFiles(stack.cacheDir).other).toEqual([])
    const rescan = await (await fetch(`${stack.decoder.url}/v1/cache/rescan`, { method: 'POST' })).json() as { report: Record<string, any> }
    expect(rescan.report).toMatchObject({ unreadable: 0, tempKept: 0, refused: {} })
    await stack.restartEngine()
  })
})

async function enginePrefilled (): Promise<number> {
  return (await (await fetch(`${stack.engine.url}/health`)).json() as { engine_prefilled_tokens: number }).engine_prefilled_tokens
}

describe('bridges that overlap (queue.concurrentBridges 2)', () => {
  it('two cold prompts at once: both complete, their bridges ran at the same time', async () => {
    const [p, q] = [chatPrompt(art.tokenizer, 311, 800), chatPrompt(art.tokenizer, 312, 800)]
    const [a, b] = await Promise.all([chat(fronts.pair.url, p.messages), chat(fronts.pair.url, q.messages)])
    expect([a.verdict, b.verdict]).toEqual(['complete', 'complete'])
    expect(a.ids).toEqual((await chat(stack.reference.url, p.messages)).ids)
    expect(b.ids).toEqual((await chat(stack.reference.url, q.messages)).ids)
    const [x, y] = [a.pd.window_ms, b.pd.window_ms]
    console.log(`windows: ${JSON.stringify(x)} ${JSON.stringify(y)}; engine_queue ${a.pd.timings_ms.engine_queue} ${b.pd.timings_ms.engine_queue}`)
    // Each started before the other ended: one's writes ran beside the other's prefill.
    expect(x.start).toBeLessThan(y.end)
    expect(y.start).toBeLessThan(x.end)
    expect(a.pd.timings_ms.queue + b.pd.timings_ms.queue).toBeLessThan(Math.max(a.pd.timings_ms.bridge_total, b.pd.timings_ms.bridge_total))
  })

  it('two cold prompts sharing two blocks: the second continues from the first\'s blocks; the engine prefilled the shared tokens once', async () => {
    const system = chatPrompt(art.tokenizer, 321, 560).messages[1].content
    const ask = (seed: number): ChatMessage[] => [{ role: 'system', content: system }, { role: 'user', content: chatPrompt(art.tokenizer, seed, 300).messages[1].content }]
    const [pm, qm] = [ask(322), ask(323)]
    const before = await enginePrefilled()
    const [a, b] = await Promise.all([chat(fronts.pair.url, pm), chat(fronts.pair.url, qm)])
    const after = await enginePrefilled()
    const [first, second] = a.pd.shared_prefix === undefined ? [a, b] : [b, a]
    expect(first.verdict).toBe('complete')
    expect(second.pd.shared_prefix).toMatchObject({ blocks: 2 })
    expect(second.pd.resumed_from).toBe(2 * BLOCK)
    expect(second.verdict).toMatch(/^complete \(warm: \d+ tokens bridged from boundary 512\)$/)
    // The engine ran the first capture whole and only the second's tokens past the shared blocks.
    const firstTokens = first.pd.capture.token_count as number
    const secondTokens = (second.pd.capture.token_count as number) - 2 * BLOCK
    expect(after - before).toBe(firstTokens + secondTokens)
    expect(a.ids).toEqual((await chat(stack.reference.url, pm)).ids)
    expect(b.ids).toEqual((await chat(stack.reference.url, qm)).ids)
  })
})

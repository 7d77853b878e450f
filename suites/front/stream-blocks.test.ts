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

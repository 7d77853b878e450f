// The verdict tells what really happened, on the real stack.
// - Refuse before work: bodies the decoder refuses, each with a long cold prompt (three full blocks
//   nobody has stored), sent to the front door and to the decoder itself. The front door answers
//   exactly the decoder's status and error, with the verdict `declined: request refused (<status>)`,
//   and the prefill engine accepts no request for any of them (its /health `accepted_requests` does
//   not move, no capture, no block). The control, the same kind of prompt without the fault, is
//   bridged and moves the count by one, so the prompts were worth a bridge.
// - What the decoder restored: after a bit flip in a stored block, the front door still sees every
//   block stored, the decoder restores only the blocks before it; the verdict says the decoder's number.
import { readdirSync } from 'node:fs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { blockKeyChain } from '../../src/decode/store/block-key.ts'
import { blockPath } from '../../src/decode/store/block-file.ts'
import { flipTensorBit } from '../support/flip-bit.ts'
import { BLOCK, frontConfig, makeArtifacts, startFront, startStack, storeFiles, tempDir, textPrompt, type Artifacts, type Proc, type Stack } from './stack.ts'

let tmp: ReturnType<typeof tempDir>
let art: Artifacts
let stack: Stack
let front: Proc
let frontOff: Proc
let seed = 38_000

interface Answer { status: number, json: any, verdict: string | null }

async function send (url: string, path: string, body: string): Promise<Answer> {
  const res = await fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
  const text = await res.text()
  return { status: res.status, json: JSON.parse(text), verdict: res.headers.get('x-pd-bridge') }
}

async function engineHealth (): Promise<{ accepted_requests: number, engine_prefilled_tokens: number }> {
  return await (await fetch(`${stack.engine.url}/health`)).json() as { accepted_requests: number, engine_prefilled_tokens: number }
}

/** A fresh prompt of three full blocks and a tail: cold, long, worth a bridge. */
function coldText (): { text: string, ids: number[] } {
  return textPrompt(art.tokenizer, seed++, 3 * BLOCK + 40)
}

/** `json` (an object's JSON text) with `extra` (raw JSON members) spliced in before its closing brace. */
function withMembers (json: string, extra: string): string {
  return `${json.slice(0, -1)},${extra}}`
}

beforeAll(async () => {
  tmp = tempDir('refuse-first')
  art = await makeArtifacts(tmp.dir)
  stack = await startStack(tmp.dir, art)
  front = await startFront(tmp.dir, 'front', frontConfig(stack))
  frontOff = await startFront(tmp.dir, 'front-off', frontConfig(stack, { decoder: { requestRules: 'off' } }))
})

afterAll(async () => {
  await Promise.all([front?.stop(), frontOff?.stop(), stack?.stop()])
  tmp?.remove()
})

describe('a body the decoder refuses is refused before any work', () => {
  it('long cold prompts: the decoder\'s own status and error, verdict refused, no prefill accepted, nothing captured or stored', async () => {
    const before = await engineHealth()
    const cases: Array<[string, () => { path: string, body: string }]> = [
      ['a __proto__ key', () => ({ path: '/v1/completions', body: withMembers(JSON.stringify({ prompt: coldText().text, max_tokens: 4 }), '"__proto__":{"admin":true}') })],
      ['an escaped __proto__ key in a stop list', () => ({ path: '/v1/completions', body: withMembers(JSON.stringify({ prompt: coldText().text }), '"stop":[{"\\u005f_proto__":1}]') })],
      ['constructor.prototype in a message', () => ({ path: '/v1/chat/completions', body: JSON.stringify({ messages: [{ role: 'user', content: coldText().text, constructor: { prototype: { x: 1 } } }] }) })],
      ['temperature 2.5', () => ({ path: '/v1/completions', body: JSON.stringify({ prompt: coldText().text, temperature: 2.5 }) })],
      ['stream_options without stream', () => ({ path: '/v1/completions', body: JSON.stringify({ prompt: coldText().text, stream_options: { include_usage: true } }) })],
      ['max_tokens over the decoder\'s --max-tokens 64', () => ({ path: '/v1/completions', body: JSON.stringify({ prompt: coldText().text, max_tokens: 65 }) })],
      ['a model the decoder does not serve', () => ({ path: '/v1/completions', body: JSON.stringify({ prompt: coldText().text, model: 'another-model' }) })],
      ['a token id outside the vocabulary', () => ({ path: '/v1/completions', body: JSON.stringify({ prompt: [...coldText().ids.slice(0, -1), art.tokenizer.vocabSize + 1_000_000] }) })],
    ]
    for (const [what, make] of cases) {
      const { path, body } = make()
      const direct = await send(stack.decoder.url, path, body)
      const via = await send(front.url, path, body)
      expect(direct.status, what).toBeGreaterThanOrEqual(400)
      expect(direct.status, what).toBeLessThan(500)
      expect({ status: via.status, error: via.json.error }, what).toEqual({ status: direct.status, error: direct.json.error })
      expect(via.verdict, what).toBe(`declined: request refused (${direct.status})`)
    }
    const after = await engineHealth()
    expect(after.accepted_requests).toBe(before.accepted_requests)
    expect(after.engine_prefilled_tokens).toBe(before.engine_prefilled_tokens)
    expect(readdirSync(stack.captureRoot).filter((n) => !n.startsWith('.'))).toEqual([])
    expect(storeFiles(stack.cacheDir).blocks).toEqual([])

    // The control: the same kind of prompt, nothing wrong with it, is bridged.
    const ok = await send(front.url, '/v1/completions', JSON.stringify({ prompt: coldText().text, max_tokens: 4 }))
    expect(ok.status).toBe(200)
    expect(ok.verdict).toBe('complete')
    expect((await engineHealth()).accepted_requests).toBe(before.accepted_requests + 1)
  })

  it('a short prompt the decoder refuses says refused, not short prompt, with or without the decoder\'s rules in the front door', async () => {
    const short = JSON.stringify({ prompt: 'a few words', max_tokens: 4 })
    for (const [url, body] of [[front.url, withMembers(short, '"__proto__":{}')], [frontOff.url, withMembers(short, '"temperature":2.5')]] as const) {
      const direct = await send(stack.decoder.url, '/v1/completions', body)
      const via = await send(url, '/v1/completions', body)
      expect(direct.status).toBe(400)
      expect({ status: via.status, error: via.json.error }).toEqual({ status: direct.status, error: direct.json.error })
      expect(via.verdict).toBe('declined: request refused (400)')
    }
  })
})

describe('a warm verdict states what the decoder restored, not what the front door saw stored', () => {
  it('a block that fails its integrity check: every usable block stored, the decoder restores the one before it', async () => {
    const { text, ids } = coldText()
    const body = JSON.stringify({ prompt: text, max_tokens: 4 })
    expect((await send(front.url, '/v1/completions', body)).verdict).toBe('complete')
    // Block 1 of 3 flipped: the front door's view (the files) still holds all three; the decoder
    // checks content, quarantines block 1 and restores block 0 alone.
    const keys = blockKeyChain(stack.modelName, ids, BLOCK)
    await flipTensorBit(blockPath(stack.cacheDir, keys[1]), 'layer_1_sub_1_state_2', 7, 1)
    const again = await send(front.url, '/v1/completions', body)
    expect(again.status).toBe(200)
    const cached = again.json.usage.prompt_tokens_details.cached_tokens as number
    expect(cached).toBe(BLOCK)
    expect(again.json.pd_bridge.cached_tokens).toBe(cached)
    expect(again.verdict).toBe(`declined: warm prompt (${3 * BLOCK} of ${ids.length} tokens stored; ${ids.length - 3 * BLOCK} not stored < PD_MIN_TAIL ${BLOCK}); the decoder restored ${BLOCK} of the ${ids.length} tokens (cached_tokens), not the ${3 * BLOCK} the front door saw stored`)
    expect(again.json.pd_bridge.verdict).toBe(again.verdict)
  })
})

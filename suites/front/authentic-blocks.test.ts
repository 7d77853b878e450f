// Authentic blocks through the real bridge (issue 38): the stack (prefill engine, share, decoder, a
// reference decoder) and the front door all started with PD_BLOCK_KEY. A cold prompt bridges
// complete and every block the bridge wrote carries a keyed digest under the key; the decoder
// serves them. Then one bridged block is tampered with in the decoder's store, as someone who can
// write it would (a tensor changed, content_sha256 recomputed): the same prompt again is restored
// up to that block only, the decoder refuses and quarantines it, and the answer is the reference
// decoder's (native) answer.
import { readdirSync } from 'node:fs'
import { join } from 'node:path'
import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { HANG_LIMIT_MS } from '../support/hang-limit.ts'
import { blockKeyChain, blockPath, QUARANTINE_DIR, verifyBlockDir } from '../../src/decode/store/index.ts'
import { deriveBlockKey } from '../../src/config/block-key.ts'
import { tamperBlock } from '../support/tamper-block.ts'
import { BLOCK, chatPrompt, frontConfig, makeArtifacts, startFront, startStack, tempDir, type Artifacts, type Stack } from './stack.ts'

const SECRET = 'front-authentic-blocks-key'
const tmp = tempDir('front-authentic')
let art: Artifacts
let stack: Stack
let front: Awaited<ReturnType<typeof startFront>>

beforeAll(async () => {
  art = await makeArtifacts(tmp.dir)
  const env = { PD_BLOCK_KEY: SECRET, PD_API_KEY: '' }
  stack = await startStack(tmp.dir, art, env)
  front = await startFront(tmp.dir, 'keyed', frontConfig(stack), env)
})

afterAll(async () => {
  await front?.stop()
  await stack?.stop()
  tmp.remove()
})

const prompt = (): ReturnType<typeof chatPrompt> => chatPrompt(art.tokenizer, 3801, 700)

async function ask (url: string): Promise<{ text: string | null, cached: number | undefined, verdict: string | null }> {
  const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: HANG_LIMIT_MS })
  const { data, response } = await client.chat.completions.create({ model: stack.modelName, messages: prompt().messages as never, max_tokens: 8, temperature: 0 }).withResponse()
  return { text: data.choices[0].message.content, cached: data.usage?.prompt_tokens_details?.cached_tokens, verdict: response.headers.get('x-pd-bridge') }
}

describe('with PD_BLOCK_KEY on the front door and the decoder', () => {
  let native: Awaited<ReturnType<typeof ask>>

  it('a cold prompt bridges complete, and every bridged block is authenticated under the key', async () => {
    expect(front.ready).toMatchObject({ blocks_authenticated: true })
    native = await ask(stack.reference.url)
    expect(native.cached).toBe(0)
    const bridged = await ask(front.url)
    expect(bridged.verdict).toBe('complete')
    expect(bridged.cached).toBe(2 * BLOCK)
    expect(bridged.text).toBe(native.text)
    const v = await verifyBlockDir(stack.cacheDir, deriveBlockKey(SECRET).key)
    expect(v.blocks.length).toBe(2)
    expect(v).toMatchObject({ ok: 2, unauthenticated: 0, corrupt: 0 })
  })

  it('a bridged block tampered with in the store is refused and quarantined by the decoder; the answer is the native one', async () => {
    const [, k1] = blockKeyChain(stack.modelName, prompt().ids, BLOCK)
    await tamperBlock(blockPath(stack.cacheDir, k1), 'layer_1_sub_1_state_2', 7, 1)
    const again = await ask(front.url)
    expect(again.cached).toBe(BLOCK)
    expect(again.text).toBe(native.text)
    const h = await (await fetch(`${stack.decoder.url}/health`)).json() as Record<string, any>
    expect(h.cache.store.refused).toEqual({ authentication: 1 })
    expect(h.cache.store.quarantined).toBe(1)
    expect(h.cache.authentication).toEqual({ authenticated: true, key_id: deriveBlockKey(SECRET).id, key_source: 'PD_BLOCK_KEY' })
    const runs = readdirSync(join(stack.cacheDir, QUARANTINE_DIR))
    expect(runs).toHaveLength(1)
    expect(readdirSync(join(stack.cacheDir, QUARANTINE_DIR, runs[0], k1[0]))).toEqual([`${k1}.safetensors`])
    expect(front.output() + stack.decoder.output()).not.toContain(SECRET)
  })
})

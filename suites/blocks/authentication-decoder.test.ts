// End to end, with real processes (issue 38, "Authentic blocks"): two `pd-bridge decoder`s on the
// tiny checkpoint, one without a block key and one with PD_BLOCK_KEY, each store a 700-token
// prompt's two blocks themselves. Then block 1 is tampered with in each store as someone who can
// write the store would: a tensor changed and content_sha256 recomputed with the published rule.
// Without a key the decoder serves it (cached_tokens 512: the plain digest catches damage, not
// tampering). With the key it is a miss from block 1 on (cached_tokens 256), the answer is the
// native one token for token (each decoder's first, cold answer), and /health, the log and the
// quarantine show the refused block; the decoder then writes an authentic block 1 again.
import { readdir } from 'node:fs/promises'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { SafetensorsFile } from '../../src/formats/safetensors/index.ts'
import { QUARANTINE_DIR, blockKeyChain, blockPath } from '../../src/decode/store/index.ts'
import { deriveBlockKey } from '../../src/config/block-key.ts'
import { tamperBlock } from '../support/tamper-block.ts'
import { makeTiny, startDecoderChild, tempDir, type DecoderChild } from '../decoder-server/helpers.ts'
import { BS, prompt } from './helpers.ts'

const tmp = tempDir('authentication-decoder')
const T = prompt(700, 3838)
const MAX = 16
const SECRET = 'authentication-decoder-test-key'
let plain: DecoderChild
let keyed: DecoderChild
const plainStore = `${tmp.dir}/plain-cache`
const keyedStore = `${tmp.dir}/keyed-cache`

beforeAll(async () => {
  const modelDir = await makeTiny(`${tmp.dir}/model`)
  const common = ['--model', modelDir, '--block-size', String(BS), '--model-name', 'tiny', '--max-tokens', '64']
  // Neither key variable from the test's own environment: one decoder gets none, the other PD_BLOCK_KEY alone.
  const none = { PD_BLOCK_KEY: '', PD_API_KEY: '' }
  ;[plain, keyed] = await Promise.all([
    startDecoderChild([...common, '--cache-dir', plainStore], `${tmp.dir}/plain.log`, none),
    startDecoderChild([...common, '--cache-dir', keyedStore], `${tmp.dir}/keyed.log`, { ...none, PD_BLOCK_KEY: SECRET }),
  ])
})

afterAll(async () => {
  await Promise.all([plain?.stop(), keyed?.stop()])
  tmp.remove()
})

interface Answer { ids: number[], cached: number }

async function complete (d: DecoderChild): Promise<Answer> {
  const r = await fetch(`${d.url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'tiny', prompt: T, max_tokens: MAX, ignore_eos: true, return_token_ids: true }),
  })
  expect(r.status).toBe(200)
  const body = await r.json() as { choices: Array<{ token_ids: number[] }>, usage: { prompt_tokens_details: { cached_tokens: number } } }
  return { ids: body.choices[0].token_ids, cached: body.usage.prompt_tokens_details.cached_tokens }
}

async function health (d: DecoderChild): Promise<Record<string, any>> {
  return await (await fetch(`${d.url}/health`)).json() as Record<string, any>
}

/** The decoder stores the prompt's two blocks itself; its cold (native) answer. */
async function storeTwoBlocks (d: DecoderChild): Promise<Answer> {
  const cold = await complete(d)
  expect(cold.cached).toBe(0)
  expect(cold.ids).toHaveLength(MAX)
  expect(await complete(d)).toEqual({ cached: 2 * BS, ids: cold.ids })
  return cold
}

const [, k1] = blockKeyChain('tiny', T, BS)

describe('a block tampered with in the store (a tensor changed, content_sha256 recomputed)', () => {
  it('without a block key is served: cached_tokens 512, nothing refused (the limit the key closes)', async () => {
    await storeTwoBlocks(plain)
    const path = blockPath(plainStore, k1)
    const f = await SafetensorsFile.open(path)
    expect(f.metadata.content_hmac_sha256).toBeUndefined()
    await f.close()
    await tamperBlock(path, 'layer_1_sub_1_state_2', 7, 1)
    const after = await complete(plain)
    expect(after.cached).toBe(2 * BS)
    const h = await health(plain)
    expect(h.cache.store.refused).toEqual({})
    expect(h.cache.authentication).toEqual({ authenticated: false, key_id: null, key_source: null })
  })

  it('with a block key is a miss from that block on, quarantined, and the answer equals the native one', async () => {
    const native = await storeTwoBlocks(keyed)
    const path = blockPath(keyedStore, k1)
    const f = await SafetensorsFile.open(path)
    expect(f.metadata.content_hmac_sha256).toMatch(/^[0-9a-f]{64}$/)
    await f.close()
    await tamperBlock(path, 'layer_1_sub_1_state_2', 7, 1)

    const after = await complete(keyed)
    expect(after).toEqual({ cached: BS, ids: native.ids })

    const h = await health(keyed)
    expect(h.cache.authentication).toEqual({ authenticated: true, key_id: deriveBlockKey(SECRET).id, key_source: 'PD_BLOCK_KEY' })
    expect(h.cache.store.refused).toEqual({ authentication: 1 })
    expect(h.cache.store.quarantined).toBe(1)
    expect(h.cache.stats.integrityMisses).toBe(1)
    const log = keyed.log()
    expect(log.find((l) => l.event === 'cache.refused')).toMatchObject({ detail: { hash: k1, reason: 'authentication', during: 'load' } })
    expect(log.find((l) => l.event === 'cache.integrity-miss')).toMatchObject({ detail: { block: 1, hash: k1, reason: 'authentication', integrityMisses: 1 } })
    // The key never reaches a log line.
    expect(JSON.stringify(log)).not.toContain(SECRET)
    const runs = await readdir(join(keyedStore, QUARANTINE_DIR))
    expect(runs).toHaveLength(1)
    expect(await readdir(join(keyedStore, QUARANTINE_DIR, runs[0], k1[0]))).toEqual([`${k1}.safetensors`])

    // The decoder prefilled block 1 itself and stored an authentic one: the next request uses both.
    expect(await complete(keyed)).toEqual({ cached: 2 * BS, ids: native.ids })
  })

  it('the ready line says whether blocks are authenticated, never the key', () => {
    expect(plain.ready).toMatchObject({ blocks_authenticated: false })
    expect(keyed.ready).toMatchObject({ blocks_authenticated: true })
    expect(JSON.stringify(keyed.ready)).not.toContain(SECRET)
  })
})

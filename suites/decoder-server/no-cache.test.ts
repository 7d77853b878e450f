// The server started in process without a prefix cache (launchDecoder with no cacheDir): prompts
// are prefilled from empty in 256-token slices with event-loop turns between them, and the answer
// is still the engine's greedy one; there is nothing to rescan.
import pino from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { launchDecoder, type LaunchedDecoder } from '../../src/engines/decoder/index.ts'
import { cutAtEos, makeTiny, tempDir } from './helpers.ts'

const tmp = tempDir('decoder-nocache')
let launched: LaunchedDecoder

beforeAll(async () => {
  const dir = await makeTiny(`${tmp.dir}/model`)
  launched = await launchDecoder({ modelDir: dir, port: 0, modelName: 'tiny', logger: pino({ level: 'silent' }) })
})

afterAll(async () => {
  await launched?.server.close()
  tmp.remove()
})

describe('no prefix cache', () => {
  it('a 600-token prompt (three prefill slices) answers the greedy tokens with cached_tokens 0', async () => {
    const prompt = Array.from({ length: 600 }, (_, i) => (i * 37 + 11) % 512)
    const res = await fetch(`${launched.server.url}/v1/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'tiny', prompt, max_tokens: 10, return_token_ids: true }),
    })
    const body = await res.json() as { choices: Array<{ token_ids: number[] }>, usage: { prompt_tokens_details: { cached_tokens: number } } }
    expect(res.headers.get('x-cached-tokens')).toBe('0')
    expect(body.usage.prompt_tokens_details.cached_tokens).toBe(0)
    const { engine } = launched.model
    expect(body.choices[0].token_ids).toEqual(cutAtEos(engine.greedy(prompt, 10), engine.config.eosTokenId))
  })

  it('/health shows no cache and POST /v1/cache/rescan is a 404 that says why', async () => {
    const h = await (await fetch(`${launched.server.url}/health`)).json() as { cache: unknown, geometry_fingerprint: string }
    expect(h.cache).toBeNull()
    expect(h.geometry_fingerprint).toBe(launched.geometryFingerprint)
    const r = await fetch(`${launched.server.url}/v1/cache/rescan`, { method: 'POST' })
    expect(r.status).toBe(404)
    expect(await r.json()).toEqual({ error: { message: expect.stringMatching(/without a prefix cache/), type: 'not_found_error', param: null, code: 'cache_disabled' } })
  })
})

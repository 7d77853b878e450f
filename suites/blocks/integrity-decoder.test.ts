// End to end, with real processes: `pd-bridge decoder` on the tiny checkpoint stores a 700-token
// prompt's two blocks itself; a bit of block 1 is flipped in its file on disk; the same prompt again
// is a hit of block 0 only (cached_tokens 256, not 512), answered with exactly the greedy tokens a
// second decoder with an empty store gives, and /health, the decoder's log and the store's
// quarantine all show the refused block. The decoder then writes block 1 anew and serves 512.
import { readdir } from 'node:fs/promises'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { SafetensorsFile } from '../../src/formats/safetensors/index.ts'
import { flipTensorBit } from '../support/flip-bit.ts'
import { QUARANTINE_DIR, blockKeyChain, blockPath } from '../../src/decode/store/index.ts'
import { makeTiny, startDecoderChild, tempDir, type DecoderChild } from '../decoder-server/helpers.ts'
import { BS, prompt } from './helpers.ts'

const tmp = tempDir('integrity-decoder')
const T = prompt(700, 4242)
const MAX = 16
let modelDir: string
let bridged: DecoderChild
let native: DecoderChild
const storeDir = `${tmp.dir}/cache`

beforeAll(async () => {
  modelDir = await makeTiny(`${tmp.dir}/model`)
  const common = ['--model', modelDir, '--block-size', String(BS), '--model-name', 'tiny', '--max-tokens', '64']
  ;[bridged, native] = await Promise.all([
    startDecoderChild([...common, '--cache-dir', storeDir], `${tmp.dir}/decoder.log`),
    startDecoderChild([...common, '--cache-dir', `${tmp.dir}/empty-cache`], `${tmp.dir}/native.log`),
  ])
})

afterAll(async () => {
  await Promise.all([bridged?.stop(), native?.stop()])
  tmp.remove()
})

interface Answer { ids: number[], cached: number, header: string | null }

async function complete (d: DecoderChild): Promise<Answer> {
  const r = await fetch(`${d.url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'tiny', prompt: T, max_tokens: MAX, ignore_eos: true, return_token_ids: true }),
  })
  expect(r.status).toBe(200)
  const body = await r.json() as { choices: Array<{ token_ids: number[] }>, usage: { prompt_tokens_details: { cached_tokens: number } } }
  return { ids: body.choices[0].token_ids, cached: body.usage.prompt_tokens_details.cached_tokens, header: r.headers.get('x-cached-tokens') }
}

async function health (d: DecoderChild): Promise<Record<string, any>> {
  return await (await fetch(`${d.url}/health`)).json() as Record<string, any>
}

describe('a flipped bit in a block the decoder stored itself', () => {
  it('is not served: cached_tokens 256, the native greedy tokens, counted in /health and the log, the block in the quarantine', async () => {
    const reference = await complete(native)
    expect(reference.cached).toBe(0)
    expect(reference.ids).toHaveLength(MAX)

    // The decoder's own write-back: the first request stores blocks 0 and 1, the second uses both.
    const first = await complete(bridged)
    expect(first).toMatchObject({ cached: 0, ids: reference.ids })
    const warm = await complete(bridged)
    expect(warm).toMatchObject({ cached: 2 * BS, ids: reference.ids })

    // Flip one bit of block 1 (its CSA main-pool rows) in the file, as a disk would.
    const [, k1] = blockKeyChain('tiny', T, BS)
    const path = blockPath(storeDir, k1)
    const f = await SafetensorsFile.open(path)
    expect(f.metadata.content_sha256).toMatch(/^[0-9a-f]{64}$/)
    await f.close()
    await flipTensorBit(path, 'layer_1_sub_1_state_2', 7, 1)

    const after = await complete(bridged)
    expect(after.cached).toBe(BS)
    expect(after.header).toBe(String(BS))
    expect(after.ids).toEqual(reference.ids)

    const h = await health(bridged)
    expect(h.cache.store.refused).toEqual({ integrity: 1 })
    expect(h.cache.store.quarantined).toBe(1)
    expect(h.cache.stats.integrityMisses).toBe(1)
    const log = bridged.log()
    const miss = log.find((l) => l.event === 'cache.integrity-miss') as { detail: Record<string, unknown>, level: number } | undefined
    expect(miss?.detail).toMatchObject({ block: 1, hash: k1, reason: 'integrity', integrityMisses: 1 })
    expect(log.find((l) => l.event === 'cache.refused')).toMatchObject({ detail: { hash: k1, reason: 'integrity', during: 'load' } })
    expect(log.find((l) => l.event === 'cache.lookup' && (l.detail as { integrityMisses?: number }).integrityMisses === 1)).toMatchObject({ detail: { cachedTokens: BS } })
    const runs = await readdir(join(storeDir, QUARANTINE_DIR))
    expect(runs).toHaveLength(1)
    expect(await readdir(join(storeDir, QUARANTINE_DIR, runs[0], k1[0]))).toEqual([`${k1}.safetensors`])

    // The decoder prefilled block 1 natively and stored it again: the next request uses both blocks.
    const healed = await complete(bridged)
    expect(healed).toMatchObject({ cached: 2 * BS, ids: reference.ids })
  })
})

// The prefill engine's side of warm-extended prompts (docs/warm-extend.md), as a real child process:
// PUT /v1/carry/{id} takes the decoder's cache at a boundary P (checked, stored under the capture
// root, removed when its request ends), POST /v1/prefill with `resume` prefills only [P, T) from it,
// and the capture it seals writes, through the block writer, exactly the blocks a native prefill of
// the whole prompt makes. Refusals name the problem: another profile (409, and /health says so), a
// carry of another geometry or past the prompt (400), a taken id (409), too big (413), not a carry
// (400, nothing kept), another content type (415).
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { encodeCarry } from '../../src/capture/carry.ts'
import type { Sidecar } from '../../src/capture/index.ts'
import { compareBlockDirs } from '../../src/decode/store/index.ts'
import { DecoderPrefixCache } from '../../src/decode/prefix-cache/index.ts'
import { streamBlocks } from '../../src/decode/writer/index.ts'
import { loadCheckpoint, type LoadedCheckpoint } from '../../src/model/checkpoint/index.ts'
import { DeepseekV4Engine } from '../../src/model/engine/index.ts'
import { readManifest } from '../../src/wire/manifest.ts'
import { providedSidecar } from '../support/checkpoints.ts'
import { seededTokens } from '../support/prompts.ts'
import { call, exists, pollUntil, startEngine, submit, tempDir, tinyCheckpoint, type EngineProcess } from './helpers.ts'

const BS = 256
const tmp = tempDir('prefill-warm')
let model: string
let ckpt: LoadedCheckpoint
let sidecar: { dir: string, sidecar: Sidecar }
let engine: DeepseekV4Engine
const engines: EngineProcess[] = []

beforeAll(async () => {
  model = await tinyCheckpoint()
  ckpt = await loadCheckpoint(model)
  sidecar = await providedSidecar('tinyDecoderSidecar256')
  engine = DeepseekV4Engine.fromCheckpoint(ckpt, 'decoder')
})
afterAll(async () => {
  for (const e of engines) {
    if (e.child.exitCode === null) {
      e.child.kill('SIGKILL')
      await e.exited
    }
  }
  tmp.remove()
})

let stores = 0
async function openStore (): Promise<DecoderPrefixCache> {
  return await DecoderPrefixCache.open({ storeRoot: join(tmp.dir, `store-${stores++}`), modelName: model, cfg: ckpt.config, profile: 'decoder', blockSize: BS, engine, log: () => {} })
}

/** A store holding the first `prefix` tokens natively, and the carry of `tokens` from it. */
async function carryOf (tokens: number[], prefix: number): Promise<{ store: DecoderPrefixCache, bytes: Uint8Array, p: number }> {
  const store = await openStore()
  await store.prefillAndStore(engine, tokens.slice(0, prefix))
  const hit = await store.lookup(tokens)
  return { store, p: hit.cachedTokens, bytes: encodeCarry(hit.cache!, { fingerprint: sidecar.sidecar.fingerprint, profile: 'decoder' }) }
}

function putCarry (url: string, id: string, bytes: Uint8Array, type = 'application/octet-stream') {
  return call(`${url}/v1/carry/${id}`, { method: 'PUT', headers: { 'content-type': type }, body: Buffer.from(bytes) })
}

async function start (name: string, args: string[]): Promise<{ engine: EngineProcess, root: string }> {
  const root = join(tmp.dir, name)
  const e = await startEngine(['--model', model, '--sidecar', sidecar.dir, '--capture-root', root, '--max-chunk', '200', ...args])
  engines.push(e)
  return { engine: e, root }
}

describe('warm-extended prompts on the prefill engine', () => {
  it('continues from a carry at 512: only the 788-token tail prefilled, the carry removed, blocks 5/5 identical to a native prefill of all 1300', async () => {
    const T = 1300
    const tokens = seededTokens(T, 71)
    const { store, bytes, p } = await carryOf(tokens, 600)
    expect(p).toBe(2 * BS)
    const { engine: e, root } = await start('decoder-profile', ['--profile', 'decoder', '--max-carry-bytes', String(bytes.length + 10)])
    expect((await call(`${e.url}/health`)).body.warm_extend).toEqual({ supported: true })

    const put = await putCarry(e.url, 'w1', bytes)
    expect(put).toMatchObject({ status: 201, body: { carry_id: 'w1', tokens: 512, bytes: bytes.length } })
    expect(exists(join(root, '.carry', 'w1.safetensors'))).toBe(true)
    expect((await putCarry(e.url, 'w1', bytes)).status).toBe(409)

    expect((await submit(e.url, { request_id: 'r1', tokens, resume: { carry_id: 'w1' } })).status).toBe(202)
    const status = await pollUntil(e.url, 'r1')
    expect(status).toMatchObject({ state: 'done', sealed_length: T, start_token: 512, prefilled_tokens: T - 512 })
    expect(exists(join(root, '.carry', 'w1.safetensors'))).toBe(false)
    expect((await readManifest(join(root, 'r1'))).startToken).toBe(512)
    const end = e.events().find((x) => x.event === 'prefill-end' && x.request_id === 'r1')
    expect(end).toMatchObject({ state: 'done', start_token: 512 })

    const report = await streamBlocks({ dir: join(root, 'r1'), target: store, sidecar: sidecar.sidecar, requestId: 'r1', tokens })
    expect(report).toMatchObject({ startToken: 512, blocks: 3, written: 3 })
    const native = await openStore()
    await native.prefillAndStore(engine, tokens)
    const verdict = await compareBlockDirs(native.store.root, store.store.root)
    expect(verdict.blocks.flatMap((x) => x.differences)).toEqual([])
    expect(`${verdict.identical}/${verdict.total}`).toBe('5/5')

    // Too big for --max-carry-bytes: refused by its Content-Length, nothing kept.
    const bigger = (await carryOf(tokens, 1100)).bytes
    expect(bigger.length).toBeGreaterThan(bytes.length + 10)
    const big = await putCarry(e.url, 'w2', bigger)
    expect(big.status).toBe(413)
    expect(big.body.error.message).toMatch(/--max-carry-bytes/)
    expect(readdirSync(join(root, '.carry'))).toEqual([])
    e.child.kill('SIGTERM')
    await e.exited
  })

  it('refuses what it cannot use, and names why', async () => {
    const tokens = seededTokens(900, 72)
    const { bytes } = await carryOf(tokens, 600)
    const { engine: e, root } = await start('refusals', ['--profile', 'decoder'])
    expect((await putCarry(e.url, 'c1', bytes, 'application/json')).status).toBe(415)
    const junk = await putCarry(e.url, 'c2', new TextEncoder().encode('not a carry at all'))
    expect(junk.status).toBe(400)
    expect(readdirSync(join(root, '.carry'))).toEqual([])
    expect((await putCarry(e.url, 'c3', bytes)).status).toBe(201)
    const unknown = await submit(e.url, { tokens, resume: { carry_id: 'nope' } })
    expect(unknown).toMatchObject({ status: 400, body: { error: { param: 'resume.carry_id' } } })
    expect(unknown.body.error.message).toMatch(/no such carry/)
    const past = await submit(e.url, { tokens: tokens.slice(0, 400), resume: { carry_id: 'c3' } })
    expect(past.status).toBe(400)
    expect(past.body.error.message).toMatch(/stands at token 512, not below the prompt's 400 tokens/)
    expect((await submit(e.url, { tokens, resume: { carry_id: 'c3', extra: 1 } })).status).toBe(400)
    // A carry no request will use is removed on request.
    expect((await call(`${e.url}/v1/carry/c3`, { method: 'DELETE' })).status).toBe(200)
    expect(readdirSync(join(root, '.carry'))).toEqual([])
    e.child.kill('SIGTERM')
    await e.exited
  })

  it('an engine under another profile than the decoder\'s refuses carries (409), and /health says why; leftovers go at start-up', async () => {
    const root = join(tmp.dir, 'other-profile')
    mkdirSync(join(root, '.carry'), { recursive: true })
    writeFileSync(join(root, '.carry', 'old.safetensors'), 'left by an earlier engine')
    const { engine: e } = await start('other-profile', ['--profile', 'prefill'])
    expect(exists(join(root, '.carry'))).toBe(false)
    expect(e.events().some((x) => x.event === 'carry-removed' && x.file === 'old.safetensors')).toBe(true)
    const health = (await call(`${e.url}/health`)).body.warm_extend
    expect(health.supported).toBe(false)
    expect(health.reason).toMatch(/prefills under profile prefill and the decoder's cache is under decoder/)
    const { bytes } = await carryOf(seededTokens(900, 73), 600)
    const put = await putCarry(e.url, 'c1', bytes)
    expect(put.status).toBe(409)
    expect(put.body.error.message).toMatch(/warm-extended prompts are not served here/)
    e.child.kill('SIGTERM')
    await e.exited
  })
})

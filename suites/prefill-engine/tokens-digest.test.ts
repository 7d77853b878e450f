// The capture records which token ids it was computed over: `tokens_sha256` (SHA-256 of the ids as
// little-endian uint32) is checked against the ids the engine would prefill when the client sends it
// (a mismatch is a 400, nothing is captured), and the engine's own digest of the ids it prefills is
// written into the capture manifest (and shown in the status) whether or not the client sent one.
import { createHash } from 'node:crypto'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { readManifest, tokenIdsSha256 } from '../../src/wire/manifest.ts'
import { ApiError } from '../../src/engines/prefill/api-error.ts'
import { parsePrefillRequest, type RequestLimits } from '../../src/engines/prefill/request.ts'
import { loadTokenizer } from '../../src/model/tokenizer/index.ts'
import { exists, pollUntil, startEngine, submit, tempDir, tinyCheckpoint, tinySidecar, type EngineProcess } from './helpers.ts'

/** The documented digest, computed here without the code under test. */
function digest (ids: number[]): string {
  const b = Buffer.alloc(ids.length * 4)
  ids.forEach((t, i) => b.writeUInt32LE(t, i * 4))
  return createHash('sha256').update(b).digest('hex')
}

const ids = (n: number, seed: number): number[] => Array.from({ length: n }, (_, i) => (i * 37 + seed * 11 + 5) % 512)

describe('tokenIdsSha256', () => {
  it('is SHA-256 over the ids as little-endian uint32, and refuses what is not an id', () => {
    expect(tokenIdsSha256([1, 2])).toBe(createHash('sha256').update(Buffer.from([1, 0, 0, 0, 2, 0, 0, 0])).digest('hex'))
    expect(tokenIdsSha256(Int32Array.from([7, 300, 0]))).toBe(digest([7, 300, 0]))
    expect(tokenIdsSha256([1, 2])).not.toBe(tokenIdsSha256([2, 1]))
    expect(() => tokenIdsSha256([1, -1])).toThrow(/token 1 is -1/)
    expect(() => tokenIdsSha256([1.5])).toThrow(/token 0 is 1.5/)
  })
})

describe('parsePrefillRequest and tokens_sha256', () => {
  let limits: RequestLimits
  beforeAll(async () => {
    limits = { vocabSize: 512, maxTokens: 100, maxPositionEmbeddings: 1000, tokenizer: await loadTokenizer(await tinyCheckpoint()) }
  })

  function refusal (body: unknown): ApiError {
    try {
      parsePrefillRequest(body, limits)
    } catch (e) {
      if (e instanceof ApiError) return e
      throw e
    }
    throw new Error(`accepted ${JSON.stringify(body)}`)
  }

  it('always gives the digest of the resolved ids; a matching tokens_sha256 is accepted', () => {
    const t = ids(40, 1)
    expect(parsePrefillRequest({ tokens: t }, limits).tokensSha256).toBe(digest(t))
    expect(parsePrefillRequest({ tokens: t, tokens_sha256: digest(t) }, limits).tokensSha256).toBe(digest(t))
    const text = parsePrefillRequest({ prompt: 'The harbour town' }, limits)
    expect(text.tokensSha256).toBe(digest([...text.tokens]))
    expect(parsePrefillRequest({ prompt: 'The harbour town', tokens_sha256: text.tokensSha256 }, limits).tokensSha256).toBe(text.tokensSha256)
  })

  it('a digest of other ids is a 400 naming tokens_sha256 and both digests; a malformed one too', () => {
    const t = ids(40, 1)
    const other = [...t.slice(0, 39), (t[39] + 1) % 512]
    const e = refusal({ tokens: t, tokens_sha256: digest(other) })
    expect(e).toMatchObject({ status: 400, param: 'tokens_sha256' })
    expect(e.message).toBe(`tokens_sha256 is ${digest(other)}, but the 40 token ids this engine would prefill (from tokens) hash to ${digest(t)}`)
    expect(refusal({ tokens: t, tokens_sha256: 'ABC' })).toMatchObject({ status: 400, param: 'tokens_sha256', message: expect.stringMatching(/must be 64 lowercase hex digits/) })
    expect(refusal({ tokens: t, tokens_sha256: 7 })).toMatchObject({ status: 400, param: 'tokens_sha256' })
  })
})

describe('the engine writes the digest into the capture manifest', () => {
  const tmp = tempDir('prefill-tokens-digest')
  const root = join(tmp.dir, 'captures')
  let engine: EngineProcess
  beforeAll(async () => {
    engine = await startEngine(['--model', await tinyCheckpoint(), '--sidecar', (await tinySidecar()).dir, '--capture-root', root, '--max-chunk', '64', '--max-tokens', '2048'])
  })
  afterAll(async () => {
    if (engine?.child.exitCode === null) {
      engine.child.kill('SIGKILL')
      await engine.exited
    }
    tmp.remove()
  })

  it('with and without tokens_sha256 in the request; a mismatch is refused before any capture starts', async () => {
    const t = ids(300, 2)
    expect((await submit(engine.url, { request_id: 'dig-1', tokens: t, tokens_sha256: digest(t) })).status).toBe(202)
    expect(await pollUntil(engine.url, 'dig-1')).toMatchObject({ state: 'done', tokens_sha256: digest(t) })
    expect((await readManifest(join(root, 'dig-1'))).tokensSha256).toBe(digest(t))

    const u = ids(300, 3)
    expect((await submit(engine.url, { request_id: 'dig-2', tokens: u })).status).toBe(202)
    await pollUntil(engine.url, 'dig-2')
    expect((await readManifest(join(root, 'dig-2'))).tokensSha256).toBe(digest(u))

    const bad = await submit(engine.url, { request_id: 'dig-3', tokens: u, tokens_sha256: digest(t) })
    expect(bad.status).toBe(400)
    expect(bad.body.error).toMatchObject({ param: 'tokens_sha256', message: expect.stringMatching(/hash to [0-9a-f]{64}$/) })
    expect(exists(join(root, 'dig-3'))).toBe(false)
  })
})

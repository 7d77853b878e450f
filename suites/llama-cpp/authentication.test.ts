// Authentic llama.cpp state files (issue 38): two `decoder --engine llama.cpp` launched in process
// on the tiny GGUF (blocks of 64), one without a block key and one with. Each stores a prompt's
// states at 64 and 128 itself; then a byte deep in the 128 state is changed the way someone who
// can write the store would (the file still parses and passes the geometry and token guard).
// Without a key llama.cpp restores it (cached 128: nothing vouches for the bytes). With the key the
// state's keyed digest (<file>.hmac) no longer matches: it is refused, quarantined with its digest,
// the 64 state is restored instead, and the answer equals a plain llama.cpp run's. A state without
// a keyed digest (written without the key) is refused the same way.
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import pino from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { deriveBlockKey } from '../../src/config/block-key.ts'
import { launchLlamaCppDecoder, type LaunchedLlamaCppDecoder } from '../../src/engines/llama-cpp/decoder/index.ts'
import { LlamaCppModel } from '../../src/engines/llama-cpp/runner.ts'
import { stateGeometry } from '../../src/engines/llama-cpp/state/index.ts'
import { LlamaCppStateStore, STATE_SUFFIX } from '../../src/engines/llama-cpp/store/index.ts'
import { exportGguf } from '../../src/model/gguf/index.ts'
import { loadDeepseekV4Config } from '../../src/model/config.ts'
import { cutAtEos, makeTiny, tempDir } from '../decoder-server/helpers.ts'

const BLOCK = 64
const MAX = 8
const EOS = 1
const MODEL_NAME = 'tiny-llama'
const SECRET = 'llama-authentication-test-key'
const tmp = tempDir('llama-authentication')
const PROMPT = Array.from({ length: 150 }, (_, i) => 5 + ((i * 37 + 707 + ((i * i) % 13)) % 500))

interface Side { decoder: LaunchedLlamaCppDecoder, dir: string, logFile: string }
let plainSide: Side
let keyedSide: Side
let plainModel: LlamaCppModel
let keys: LlamaCppStateStore
let want: number[]

async function launch (name: string, gguf: string, modelDir: string, key: boolean): Promise<Side> {
  const dir = join(tmp.dir, `${name}-cache`)
  const logFile = join(tmp.dir, `${name}.log`)
  const logger = pino({ level: 'info' }, pino.destination({ dest: logFile, sync: true }))
  const decoder = await launchLlamaCppDecoder({
    modelDir, gguf, cacheDir: dir, blockSize: BLOCK, modelName: MODEL_NAME, port: 0, maxTokens: 64, logger,
    ...(key ? { blockKey: deriveBlockKey(SECRET) } : {}),
  })
  return { decoder, dir, logFile }
}

beforeAll(async () => {
  const modelDir = await makeTiny(join(tmp.dir, 'model'))
  const gguf = join(tmp.dir, 'tiny.gguf')
  await exportGguf({ model: modelDir, out: gguf, type: 'f32' })
  const cfg = await loadDeepseekV4Config(modelDir)
  plainSide = await launch('plain', gguf, modelDir, false)
  keyedSide = await launch('keyed', gguf, modelDir, true)
  keys = LlamaCppStateStore.open({ dir: join(tmp.dir, 'keys-only'), modelName: MODEL_NAME, blockSize: BLOCK, geometry: stateGeometry(cfg) })
  plainModel = await LlamaCppModel.load(gguf)
  // What a plain llama.cpp session (one batch, no store) answers.
  const s = await plainModel.session({ contextSize: PROMPT.length + MAX + 4 })
  try {
    const { logits } = await s.evaluate(PROMPT, 1)
    want = cutAtEos(await s.greedy(logits, MAX), EOS)
  } finally {
    await s.dispose()
  }
})

afterAll(async () => {
  await plainSide?.decoder.close()
  await keyedSide?.decoder.close()
  await plainModel?.dispose()
  tmp.remove()
})

async function complete (side: Side): Promise<{ ids: number[], cached: number }> {
  const r = await fetch(`${side.decoder.server.url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL_NAME, prompt: PROMPT, max_tokens: MAX, return_token_ids: true }),
  })
  expect(r.status).toBe(200)
  const body = await r.json() as { choices: Array<{ token_ids: number[] }>, usage: { prompt_tokens_details: { cached_tokens: number } } }
  return { ids: body.choices[0].token_ids, cached: body.usage.prompt_tokens_details.cached_tokens }
}

const stateAt = (side: Side, n: number): string => join(side.dir, keys.keysOf(PROMPT.slice(0, n)).at(-1)! + STATE_SUFFIX)
const health = async (side: Side): Promise<Record<string, any>> => await (await fetch(`${side.decoder.server.url}/health`)).json() as Record<string, any>
const logLines = (side: Side): Array<Record<string, unknown>> => readFileSync(side.logFile, 'utf8').split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>)

/** Change one byte near the end of a state file (a compressor ring value): it still parses and passes the guard. */
function tamper (path: string): void {
  const bytes = readFileSync(path)
  bytes[bytes.length - 3] ^= 0x40
  writeFileSync(path, bytes)
}

describe('a llama.cpp state file changed in the store', () => {
  it('without a block key is restored (cached 128): nothing vouches for its bytes', async () => {
    expect(await complete(plainSide)).toEqual({ ids: want, cached: 0 })
    expect(existsSync(stateAt(plainSide, 128) + '.hmac')).toBe(false)
    tamper(stateAt(plainSide, 128))
    expect((await complete(plainSide)).cached).toBe(128)
    expect((await health(plainSide)).cache).toMatchObject({ stats: { refused: 0 }, authentication: { authenticated: false } })
  })

  it('with a block key is refused, quarantined with its keyed digest, and the 64 state answers as plain llama.cpp does', async () => {
    expect(await complete(keyedSide)).toEqual({ ids: want, cached: 0 })
    expect(readFileSync(stateAt(keyedSide, 128) + '.hmac', 'utf8')).toMatch(/^[0-9a-f]{64}\n$/)
    expect(await complete(keyedSide)).toEqual({ ids: want, cached: 128 })

    const path = stateAt(keyedSide, 128)
    tamper(path)
    expect(keys.check(new Uint8Array(readFileSync(path)), PROMPT.slice(0, 128)).tokens).toHaveLength(128)
    expect(await complete(keyedSide)).toEqual({ ids: want, cached: 64 })
    const refused = logLines(keyedSide).filter((l) => l.event === 'cache.refused')
    expect(refused).toHaveLength(1)
    expect(refused[0]).toMatchObject({ file: path })
    expect(String(refused[0].reason)).toMatch(/authentication: its keyed digest is not the state's HMAC under this deployment's block key/)
    const quarantine = readdirSync(join(keyedSide.dir, 'quarantine'))
    expect(quarantine.map((n) => n.replace(/\.\d+$/, '')).sort()).toEqual([`${path.split('/').at(-1)}`, `${path.split('/').at(-1)}.hmac`].sort())
    const h = await health(keyedSide)
    expect(h.cache.authentication).toEqual({ authenticated: true, key_id: deriveBlockKey(SECRET).id, key_source: 'PD_BLOCK_KEY' })
    expect(h.cache.stats.refused).toBe(1)
    // The miss stored an authentic 128 state again.
    expect(await complete(keyedSide)).toEqual({ ids: want, cached: 128 })
    expect(JSON.stringify(logLines(keyedSide))).not.toContain(SECRET)
  })

  it('with a block key, a state without its keyed digest (written without the key) is refused the same way', async () => {
    rmSync(stateAt(keyedSide, 128) + '.hmac')
    expect(await complete(keyedSide)).toEqual({ ids: want, cached: 64 })
    const refused = logLines(keyedSide).filter((l) => l.event === 'cache.refused')
    expect(refused).toHaveLength(2)
    expect(String(refused[1].reason)).toMatch(/authentication: no keyed digest \(\.hmac beside it: written without the block key\)/)
  })
})

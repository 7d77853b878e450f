// `pd-bridge serve --decoder omlx` as a real child process, its front door driven over HTTP by the
// official openai client. The stack exports its sidecar with the omlx record's cache math (mlx-cpu)
// in its own state folder, the prefill engine's capture pools in that arithmetic, and one cold
// prompt long enough to bridge is bridged: the verdict says so, oMLX's directory holds the prompt's
// blocks in oMLX's layout (read back through the omlx store opened with the sidecar's cache math,
// and not without it), and they are bit-identical to what the in-process product path
// (harness/mlx/product-bridge.ts, fed by our engine's live prefill, same checkpoint, sidecar,
// prompt and block size) writes.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { readBlock, PER_WRITE, type Block } from '../../harness/mlx/compare-blocks.ts'
import { writeProductBlocks } from '../../harness/mlx/product-bridge.ts'
import { loadSidecar, type Sidecar } from '../../src/capture/index.ts'
import { openOmlxStore } from '../../src/engines/omlx/index.ts'
import { usableBlocks } from '../../src/front/routing.ts'
import { loadCheckpoint, type LoadedCheckpoint } from '../../src/model/checkpoint/index.ts'
import { DeepseekV4Engine } from '../../src/model/engine/index.ts'
import { loadTokenizer } from '../../src/model/tokenizer/index.ts'
import { buildDemoPrompt, type DemoPrompt } from '../../src/stack/demo/prompt.ts'
import { HANG_LIMIT_MS } from '../support/hang-limit.ts'
import { envWith, startServe, tempDir, type ServeChild } from './helpers.ts'

const BLOCK_SIZE = 256
// The model directory's path on the Mac, which oMLX hashes into every block key.
const MODEL_NAME = '/Users/me/models/tiny'
// Three usable full blocks (usableBlocks: the last token stays the decoder's), over the stack's
// minTokens (2 blocks) with a tail of at least one block.
const PROMPT_TOKENS = 3 * BLOCK_SIZE + 40

const tmp = tempDir('stack-serve-omlx')
const state = join(tmp.dir, 'state')
const omlxDir = join(tmp.dir, 'omlx-cache')
let standIn: OmlxStandIn
let serve: ServeChild

/** Every `.safetensors` block file under oMLX's directory (its hex-prefix folders), by hash. */
function blockFiles (root: string): Map<string, string> {
  const out = new Map<string, string>()
  for (const sub of readdirSync(root)) {
    if (!/^[0-9a-f]$/.test(sub)) continue
    for (const f of readdirSync(join(root, sub))) if (f.endsWith('.safetensors')) out.set(f.replace(/\.safetensors$/, ''), join(root, sub, f))
  }
  return out
}

interface OmlxStandIn { server: Server, url: string, forwarded: Array<{ path: string, body: Record<string, unknown> }> }

/**
 * A stand-in for oMLX's server on the Mac: an external machine, outside the product path (oMLX does
 * not run on Linux). It answers what the front door's pre-flight and forward use (/health,
 * /v1/models, /v1/chat/completions), records every forwarded body, and reports as cached_tokens the
 * whole blocks in its cache directory when the request arrives: the verdict is confirmed only if
 * the bridge's blocks are on disk before the forward. Every other route is a 404 (oMLX has no rescan).
 */
async function startOmlxStandIn (cacheDir: string): Promise<OmlxStandIn> {
  const forwarded: OmlxStandIn['forwarded'] = []
  const send = (res: ServerResponse, status: number, body: unknown): void => {
    res.writeHead(status, { 'content-type': 'application/json' })
    res.end(JSON.stringify(body))
  }
  const readBody = async (req: IncomingMessage): Promise<string> => {
    const chunks: Buffer[] = []
    for await (const c of req) chunks.push(c as Buffer)
    return Buffer.concat(chunks).toString('utf8')
  }
  const server = createServer((req, res) => {
    void (async () => {
      const path = (req.url ?? '').split('?')[0]
      if (req.method === 'GET' && path === '/health') return send(res, 200, { status: 'healthy' })
      if (req.method === 'GET' && path === '/v1/models') return send(res, 200, { object: 'list', data: [{ id: MODEL_NAME, object: 'model', owned_by: 'omlx' }] })
      if (req.method === 'POST' && path === '/v1/chat/completions') {
        const body = JSON.parse(await readBody(req)) as Record<string, unknown>
        forwarded.push({ path, body })
        const cached = blockFiles(cacheDir).size * BLOCK_SIZE
        // The stand-in does not tokenize: prompt_tokens is the prompt's nominal size (nothing reads it).
        return send(res, 200, {
          id: 'chatcmpl-standin', object: 'chat.completion', created: Math.floor(Date.now() / 1000), model: body.model,
          choices: [{ index: 0, message: { role: 'assistant', content: 'stand-in answer' }, finish_reason: 'stop', logprobs: null }],
          usage: { prompt_tokens: PROMPT_TOKENS, completion_tokens: 2, total_tokens: PROMPT_TOKENS + 2, prompt_tokens_details: { cached_tokens: cached } },
        })
      }
      send(res, 404, { error: { message: `the stand-in does not serve ${req.method ?? ''} ${path}` } })
    })().catch((e: unknown) => { send(res, 500, { error: { message: String(e) } }) })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, forwarded }
}

beforeAll(async () => {
  mkdirSync(omlxDir, { recursive: true })
  standIn = await startOmlxStandIn(omlxDir)
  serve = await startServe(['--port', '0', '--decoder', 'omlx', '--omlx-cache-dir', omlxDir, '--omlx-url', standIn.url, '--omlx-model-name', MODEL_NAME], envWith(state))
})

afterAll(async () => {
  if (serve !== undefined && serve.child.exitCode === null && serve.child.signalCode === null) {
    serve.child.kill('SIGINT')
    await serve.exited
  }
  if (standIn !== undefined) await new Promise((resolve) => standIn.server.close(resolve))
  tmp.remove()
})

describe('serve --decoder omlx: the sidecar in the kind\'s cache math, one bridged prompt over HTTP', () => {
  let frontConfig: { sidecar: string, decoder: { url: string, model: string, cacheDir: string, modelName: string, profile: string } }
  let sidecar: Sidecar
  let checkpoint: LoadedCheckpoint
  let prompt: DemoPrompt
  let answer: { data: OpenAI.ChatCompletion & { pd_bridge?: { verdict: string, bridged_tokens: number, cached_tokens: number | null } }, verdict: string | null }

  beforeAll(async () => {
    frontConfig = JSON.parse(readFileSync(join(state, 'run', 'front.json'), 'utf8'))
    sidecar = await loadSidecar(frontConfig.sidecar)
    checkpoint = await loadCheckpoint(frontConfig.decoder.model)
    prompt = buildDemoPrompt(await loadTokenizer(frontConfig.decoder.model), PROMPT_TOKENS, 42)
    const client = new OpenAI({ baseURL: `${serve.ready.front}/v1`, apiKey: 'unused', maxRetries: 0, timeout: HANG_LIMIT_MS })
    const { data, response } = await client.chat.completions.create({ model: MODEL_NAME, messages: prompt.messages as OpenAI.ChatCompletionMessageParam[], max_tokens: 2 }).withResponse()
    answer = { data: data as typeof answer.data, verdict: response.headers.get('x-pd-bridge') }
    console.log(`serve --decoder omlx: ${prompt.tokens.length} prompt tokens, verdict ${String(answer.verdict)}, ${String(answer.data.pd_bridge?.bridged_tokens)} bridged`)
  })

  it('exports the sidecar with the kind\'s cache math, in a state folder of its own, and the front door carries it', () => {
    expect(sidecar.cacheMath).toBe('mlx-cpu')
    expect(sidecar.profile.name).toBe('decoder')
    expect(frontConfig.sidecar).toBe(join(state, 'sidecars', `tiny-seed1-decoder-bs${BLOCK_SIZE}-mlx-cpu`))
    // The decoder-math sidecar's folder (ours) is not the one used.
    expect(existsSync(join(state, 'sidecars', `tiny-seed1-decoder-bs${BLOCK_SIZE}`))).toBe(false)
    expect(frontConfig.decoder).toMatchObject({ url: standIn.url, cacheDir: omlxDir, modelName: MODEL_NAME, profile: 'decoder' })
  })

  it('bridges the cold prompt: the verdict says complete, and oMLX got the request with the bridged tokens cached', () => {
    const bridged = usableBlocks(prompt.tokens.length, BLOCK_SIZE) * BLOCK_SIZE
    expect(bridged).toBe(3 * BLOCK_SIZE)
    expect(answer.verdict).toBe('complete')
    expect(answer.data.pd_bridge).toMatchObject({ bridged_tokens: bridged, cached_tokens: bridged })
    expect(answer.data.pd_bridge?.verdict).toMatch(/^complete/)
    expect(standIn.forwarded).toHaveLength(1)
    expect(standIn.forwarded[0].body).toMatchObject({ model: MODEL_NAME, messages: prompt.messages })
  })

  it('oMLX\'s directory holds the prompt\'s blocks, read back by the omlx store in the sidecar\'s cache math and refused without it', async () => {
    const bridged = usableBlocks(prompt.tokens.length, BLOCK_SIZE) * BLOCK_SIZE
    expect(blockFiles(omlxDir).size).toBe(bridged / BLOCK_SIZE)
    const cfg = checkpoint.config
    const refused: string[] = []
    const open = async (withMath: boolean) => await openOmlxStore({
      cacheDir: omlxDir, modelName: MODEL_NAME, cfg, profile: 'decoder', blockSize: BLOCK_SIZE,
      log: (e) => { if (e.kind === 'refused') refused.push(e.reason) },
      ...(withMath && sidecar.json.cacheMath !== undefined ? { cacheMath: sidecar.json.cacheMath } : {}),
    })
    const hit = await (await open(true)).lookup(prompt.tokens)
    expect(hit.cachedTokens).toBe(bridged)
    expect(hit.blocks).toBe(bridged / BLOCK_SIZE)
    expect(refused).toEqual([])
    // The blocks' geometry records mlx-cpu: a store in the profile's own arithmetic does not take them.
    const miss = await (await open(false)).lookup(prompt.tokens)
    expect(miss.cachedTokens).toBe(0)
    expect(miss.reason).toMatch(/geometry/)
    expect(refused.length).toBeGreaterThan(0)
    expect(refused.every((r) => r === 'geometry')).toBe(true)
  })

  it('the blocks are bit-identical to the in-process product path\'s for the same checkpoint, sidecar, prompt and block size', async () => {
    const work = join(tmp.dir, 'in-process')
    const w = await writeProductBlocks({
      cfg: checkpoint.config, sidecar, tokens: prompt.tokens, blockSize: BLOCK_SIZE, modelName: MODEL_NAME,
      source: { engine: DeepseekV4Engine.fromCheckpoint(checkpoint, sidecar.profile.name) }, workDir: work,
    })
    const served = blockFiles(omlxDir)
    const ours = blockFiles(w.store)
    expect([...served.keys()].sort()).toEqual([...ours.keys()].sort())
    expect(ours.size).toBe(w.written)
    for (const [hash, path] of ours) {
      const a: Block = await readBlock(path)
      const b: Block = await readBlock(served.get(hash)!)
      const meta = (m: Record<string, string>): Record<string, string> => Object.fromEntries(Object.entries(m).filter(([k]) => !PER_WRITE.includes(k)))
      expect(meta(b.metadata), `${hash} metadata`).toEqual(meta(a.metadata))
      expect([...b.tensors.keys()], `${hash} tensors`).toEqual([...a.tensors.keys()])
      for (const [name, t] of a.tensors) {
        const u = b.tensors.get(name)!
        expect({ dtype: u.dtype, shape: u.shape }, `${hash} ${name}`).toEqual({ dtype: t.dtype, shape: t.shape })
        expect(Buffer.from(u.data.buffer, u.data.byteOffset, u.data.byteLength).equals(Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength)), `${hash} ${name}: every bit`).toBe(true)
      }
    }
  })
})

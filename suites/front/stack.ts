// The real stack on loopback for the front door's suites: the tiny checkpoint (seed 1), a decoder
// sidecar with 256-token blocks, and `pd-bridge prefill-engine`, `share`, `decoder` and `front` as
// child processes (launched through StackChild by suites/support/launch.ts), plus a second decoder
// with its own store as the native reference ("the decoder alone"). A fault proxy in the test
// process can stand between the front door and the share, a submit proxy between the front door
// and the prefill engine.
import type { ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { exportWeights } from '../../src/capture/index.ts'
import { makeCheckpoint } from '../../src/model/checkpoint/index.ts'
import { loadTokenizer, renderChat, type ChatMessage, type Tokenizer } from '../../src/model/tokenizer/index.ts'
import { provided, tinyCheckpoint } from '../support/checkpoints.ts'
import { launch } from '../support/launch.ts'
import { HANG_LIMIT_MS } from '../support/hang-limit.ts'
export { tempDir } from '../support/temp-dir.ts'

export const BLOCK = 256
export const BIN = new URL('../../bin/pd-bridge.mjs', import.meta.url).pathname

/** A running child process with a ready line. */
export interface Proc {
  child: ChildProcess
  url: string
  ready: Record<string, unknown>
  output: () => string
  exited: Promise<number | null>
  stop: (signal?: NodeJS.Signals) => Promise<number | null>
}

/** Start `pd-bridge <args>` and wait for its ready line (JSON with url, or a bare URL), through suites/support/launch.ts. */
export async function startProc (args: string[], env: Record<string, string> = {}): Promise<Proc> {
  const p = await launch(args, { env: { ...process.env, ...env } })
  return {
    child: p.child,
    url: p.url,
    ready: p.ready,
    output: p.output,
    exited: p.exited.then((e) => e.code),
    stop: async (signal = 'SIGTERM') => (await p.stop(signal)).code,
  }
}

/** A TCP port that was free a moment ago (for processes that must come back on the same port). */
export async function freePort (): Promise<number> {
  const s = createServer()
  s.listen(0, '127.0.0.1')
  await once(s, 'listening')
  const port = (s.address() as AddressInfo).port
  s.close()
  await once(s, 'close')
  return port
}

/** The checkpoint and its decoder sidecar (256-token blocks). */
export interface Artifacts {
  model: string
  sidecar: string
  tokenizer: Tokenizer
}

/**
 * The tiny checkpoint and the decoder's sidecar: with 256-token blocks the run's shared ones
 * (suites/support/checkpoints.ts, read-only), for another block size made into `dir`.
 */
export async function makeArtifacts (dir: string, blockSize = BLOCK): Promise<Artifacts> {
  if (blockSize === 256) {
    const model = tinyCheckpoint()
    return { model, sidecar: provided('tinyDecoderSidecar256'), tokenizer: await loadTokenizer(model) }
  }
  const model = join(dir, 'model')
  await makeCheckpoint({ preset: 'tiny', seed: 1, out: model })
  const sidecar = join(dir, 'sidecar')
  await exportWeights({ model, profile: 'decoder', out: sidecar, blockSize })
  return { model, sidecar, tokenizer: await loadTokenizer(model) }
}

/** The engines of one stack. */
export interface Stack {
  dir: string
  art: Artifacts
  captureRoot: string
  cacheDir: string
  enginePort: number
  sharePort: number
  engine: Proc
  share: Proc
  decoder: Proc
  /** The decoder alone, on its own store: the native answers to compare with. */
  reference: Proc
  modelName: string
  /** Start the prefill engine again (same port and capture root) after a test stopped it. */
  restartEngine: () => Promise<void>
  /** Start the share again on the same port (stopped with `signal`, SIGTERM by default). */
  restartShare: (signal?: NodeJS.Signals) => Promise<void>
  /** Stop the decoder with `signal` (SIGKILL by default) and start it again on the same port and store. */
  restartDecoder: (signal?: NodeJS.Signals) => Promise<void>
  stop: () => Promise<void>
}

/** Start the engines. */
export async function startStack (dir: string, art: Artifacts, env: Record<string, string> = {}): Promise<Stack> {
  const captureRoot = join(dir, 'captures')
  const cacheDir = join(dir, 'cache')
  const modelName = 'tiny-front-test'
  const [enginePort, sharePort] = [await freePort(), await freePort()]
  mkdirSync(captureRoot, { recursive: true })
  const engineArgs = ['prefill-engine', '--model', art.model, '--sidecar', art.sidecar, '--capture-root', captureRoot, '--port', String(enginePort), '--max-chunk', '256', '--profile', 'decoder']
  const shareArgs = ['share', '--root', captureRoot, '--port', String(sharePort)]
  const decoderArgs = (cache: string, log: string, port = 0): string[] => ['decoder', '--model', art.model, '--cache-dir', cache, '--block-size', String(BLOCK), '--port', String(port), '--model-name', modelName, '--max-tokens', '64', '--log', log]
  const [engine, share, decoder, reference] = await Promise.all([
    startProc(engineArgs, env),
    startProc(shareArgs, env),
    startProc(decoderArgs(cacheDir, join(dir, 'decoder.log')), env),
    startProc(decoderArgs(join(dir, 'reference-cache'), join(dir, 'reference.log')), env),
  ])
  const stack: Stack = {
    dir, art, captureRoot, cacheDir, enginePort, sharePort, engine, share, decoder, reference, modelName,
    restartEngine: async () => {
      await stack.engine.stop('SIGKILL')
      stack.engine = await startProc(engineArgs, env)
    },
    restartShare: async (signal = 'SIGTERM') => {
      await stack.share.stop(signal)
      stack.share = await startProc(shareArgs, env)
    },
    restartDecoder: async (signal = 'SIGKILL') => {
      const port = Number(new URL(stack.decoder.url).port)
      await stack.decoder.stop(signal)
      stack.decoder = await startProc(decoderArgs(cacheDir, join(dir, 'decoder.log'), port), env)
    },
    stop: async () => {
      await Promise.all([stack.engine.stop(), stack.share.stop(), stack.decoder.stop(), stack.reference.stop()])
    },
  }
  return stack
}

/** A front door config for `stack` (JSON, as a file would hold it), with `extra` merged per section. */
export function frontConfig (stack: Stack, extra: Record<string, Record<string, unknown>> = {}, shareUrl = stack.share.url): Record<string, unknown> {
  const base: Record<string, Record<string, unknown>> = {
    listen: { host: '127.0.0.1', port: 0 },
    decoder: { url: stack.decoder.url, model: stack.art.model, modelName: stack.modelName, cacheDir: stack.cacheDir, blockSize: BLOCK, profile: 'decoder' },
    prefill: { url: stack.engine.url },
    share: { url: shareUrl },
    routing: { minTokens: 2 * BLOCK, minTail: BLOCK, maxBridgeTokens: 8192 },
    queue: { maxWaiting: 4, whenFull: 'native' },
    deadlines: { pollMs: 50, engineDownPolls: 6, linkMs: 2000 },
  }
  const out: Record<string, unknown> = { sidecar: stack.art.sidecar }
  for (const key of new Set([...Object.keys(base), ...Object.keys(extra)])) out[key] = { ...base[key], ...extra[key] }
  return out
}

/** Write `config` to a file and start `pd-bridge front --config FILE`. */
export async function startFront (dir: string, name: string, config: Record<string, unknown>, env: Record<string, string> = {}): Promise<Proc & { logFile: string, log: () => Array<Record<string, any>> }> {
  const file = join(dir, `${name}.json`)
  const logFile = join(dir, `${name}.log`)
  const withLog = { ...config, log: { file: logFile, level: 'info' } }
  writeFileSync(file, JSON.stringify(withLog, null, 2))
  const proc = await startProc(['front', '--config', file], env)
  return {
    ...proc,
    logFile,
    log: () => readFileSync(logFile, 'utf8').split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, any>),
  }
}

/** Seeded words; a fresh seed gives a prompt no earlier test has sent. */
function words (seed: number, count: number): string {
  const syllables = ['ka', 'lo', 'mi', 'ter', 'sun', 'ra', 'vel', 'dor', 'pi', 'an', 'es', 'tu', 'gor', 'ne', 'shi', 'bal']
  let s = seed >>> 0
  const next = (): number => {
    s = (s * 1664525 + 1013904223) >>> 0
    return s
  }
  const out: string[] = []
  for (let i = 0; i < count; i++) {
    const n = 1 + (next() % 3)
    let w = ''
    for (let j = 0; j < n; j++) w += syllables[next() % syllables.length]
    out.push(w)
  }
  return out.join(' ')
}

/** Chat messages whose rendered prompt has at least `tokens` tokens (seeded, so fresh per seed). */
export function chatPrompt (tokenizer: Tokenizer, seed: number, tokens: number): { messages: ChatMessage[], ids: number[] } {
  let count = Math.ceil(tokens / 5)
  for (;;) {
    const messages: ChatMessage[] = [{ role: 'system', content: 'Read the notes.' }, { role: 'user', content: `${words(seed, count)}. What comes next?` }]
    const ids = tokenizer.encode(renderChat(messages, true))
    if (ids.length >= tokens) return { messages, ids }
    count = Math.ceil(count * 1.05) + 1
  }
}

/** A text prompt of at least `tokens` tokens (bos included, as the decoder encodes it). */
export function textPrompt (tokenizer: Tokenizer, seed: number, tokens: number): { text: string, ids: number[] } {
  let count = Math.ceil(tokens / 5)
  for (;;) {
    const text = words(seed, count)
    const ids = tokenizer.encode(text, { addSpecialTokens: true })
    if (ids.length >= tokens) return { text, ids }
    count = Math.ceil(count * 1.05) + 1
  }
}

/** Every file under the store root: blocks and anything else (a leftover temporary file would show). */
export function storeFiles (cacheDir: string): { blocks: string[], other: string[] } {
  const blocks: string[] = []
  const other: string[] = []
  for (const sub of readdirSync(cacheDir)) {
    if (sub === '_quarantine') {
      other.push(sub)
      continue
    }
    for (const f of readdirSync(join(cacheDir, sub))) {
      if (/^[0-9a-f]{64}\.safetensors$/.test(f) && f.startsWith(sub)) blocks.push(f)
      else other.push(join(sub, f))
    }
  }
  return { blocks, other }
}

/** A share fault: what the proxy does to the traffic it forwards. */
export type ShareFault = 'pass' | 'flip-layer-byte' | 'manifest-token-count'

/** A proxy in front of the share that can corrupt what passes. */
export interface FaultProxy {
  url: string
  fault: ShareFault
  /** Requests seen, by path. */
  seen: string[]
  close: () => Promise<void>
}

/** Start a fault proxy forwarding to `target()` (read per request, so the share may move). */
export async function startFaultProxy (target: () => string): Promise<FaultProxy> {
  const proxy: FaultProxy = { url: '', fault: 'pass', seen: [], close: async () => {} }
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', target())
    proxy.seen.push(url.pathname)
    const fault = proxy.fault
    const up = httpRequest(url, { method: req.method, headers: { ...req.headers, host: url.host } }, (upRes) => {
      const chunks: Buffer[] = []
      upRes.on('data', (c: Buffer) => chunks.push(c))
      upRes.on('end', () => {
        let body = Buffer.concat(chunks)
        const headers = { ...upRes.headers }
        if (fault === 'flip-layer-byte' && /layer-001\.safetensors$/.test(url.pathname) && body.length > 100) {
          body = Buffer.from(body)
          body[body.length - 7] ^= 0x10
        }
        if (fault === 'manifest-token-count' && /manifest\.json$/.test(url.pathname) && upRes.statusCode === 200) {
          const m = JSON.parse(body.toString('utf8')) as { tokenCount: number }
          m.tokenCount += 1
          body = Buffer.from(JSON.stringify(m, null, 2) + '\n')
          delete headers['x-content-sha256']
        }
        headers['content-length'] = String(body.length)
        res.writeHead(upRes.statusCode ?? 502, headers)
        res.end(body)
      })
    })
    up.on('error', () => res.destroy())
    req.pipe(up)
  })
  Object.assign(proxy, await listenLoopback(server))
  return proxy
}

/** A proxy in front of the prefill engine that records each submit and can rewrite its JSON body. */
export interface SubmitProxy {
  url: string
  /** Applied to every `POST /v1/prefill` body before it is forwarded; identity by default. */
  rewrite: (body: Record<string, unknown>) => Record<string, unknown>
  /** Each submit as the front door sent it (before `rewrite`), with the engine's status. */
  submits: Array<{ body: Record<string, unknown>, status: number }>
  close: () => Promise<void>
}

/** Start a submit proxy forwarding everything to `target` (submits through `rewrite`, the rest as is). */
export async function startSubmitProxy (target: string): Promise<SubmitProxy> {
  const proxy: SubmitProxy = { url: '', rewrite: (b) => b, submits: [], close: async () => {} }
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', target)
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      let body = Buffer.concat(chunks)
      let record: { body: Record<string, unknown>, status: number } | undefined
      if (req.method === 'POST' && url.pathname === '/v1/prefill') {
        const sent = JSON.parse(body.toString('utf8')) as Record<string, unknown>
        record = { body: sent, status: 0 }
        proxy.submits.push(record)
        body = Buffer.from(JSON.stringify(proxy.rewrite({ ...sent })))
      }
      const headers = { ...req.headers, host: url.host, 'content-length': String(body.length) }
      const up = httpRequest(url, { method: req.method, headers }, (upRes) => {
        if (record !== undefined) record.status = upRes.statusCode ?? 0
        res.writeHead(upRes.statusCode ?? 502, upRes.headers)
        upRes.pipe(res)
      })
      up.on('error', () => res.destroy())
      up.end(body)
    })
  })
  Object.assign(proxy, await listenLoopback(server))
  return proxy
}

/** Listen on a free 127.0.0.1 port; the URL and a close that drops open connections. */
async function listenLoopback (server: Server): Promise<{ url: string, close: () => Promise<void> }> {
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: async () => {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

/** Poll `check` until it returns a value (not undefined) or `ms` pass. */
export async function waitFor<T> (check: () => Promise<T | undefined>, ms = HANG_LIMIT_MS, what = 'condition'): Promise<T> {
  const end = Date.now() + ms
  for (;;) {
    const v = await check()
    if (v !== undefined) return v
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 25))
  }
}

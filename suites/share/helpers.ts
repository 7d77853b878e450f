// Shared pieces of the share suites: real capture directories, raw HTTP requests that no client
// normalises, a log collector, and a fault-injecting HTTP proxy that can cut a response mid-body.
import { mkdtempSync, rmSync } from 'node:fs'
import { request, createServer, type IncomingHttpHeaders } from 'node:http'
import { connect, type AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { serializeSafetensors, tensorFrom } from '../../src/formats/safetensors/index.ts'
import { addLayerFile, finishManifest, startCapture, type CaptureStart } from '../../src/capture/manifest-updates.ts'

/** A fresh temporary directory and its remover. */
export function tempDir (prefix: string): { dir: string, remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), `pd-bridge-${prefix}-`))
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) }
}

/** A real safetensors file for layer `index`: one F32 tensor of `floats` values that depend on the index. */
export function layerBytes (index: number, floats = 64): Uint8Array {
  const data = new Float32Array(floats)
  for (let i = 0; i < floats; i++) data[i] = Math.fround(Math.sin(index * 1000 + i))
  return serializeSafetensors({ [`layers.${index}.window_kv`]: tensorFrom('F32', [floats], data) }, { layer: String(index) })
}

/** What a finished test capture looks like. */
export interface MadeCapture {
  dir: string
  layers: Uint8Array[]
}

/** Write a whole capture: start, every layer, then seal it (done unless told). */
export async function makeCapture (
  root: string,
  start: CaptureStart,
  seal: { state: 'done' | 'partial' | 'failed' | 'running', sealedLength?: number, error?: string } = { state: 'done' },
  floats = 64,
): Promise<MadeCapture> {
  const dir = await startCapture(root, start)
  const layers: Uint8Array[] = []
  for (let i = 0; i < start.numLayers; i++) {
    const bytes = layerBytes(i, floats)
    layers.push(bytes)
    await addLayerFile(dir, i, bytes)
  }
  if (seal.state !== 'running') await finishManifest(dir, seal.state, { sealedLength: seal.sealedLength, error: seal.error, timings: { prefill: 12.5 } })
  return { dir, layers }
}

/** A response read completely. */
export interface RawResponse {
  status: number
  headers: IncomingHttpHeaders
  body: Buffer
}

/** Send a request with the target exactly as given (fetch would normalise `..` and `%2e`). */
export function rawRequest (baseUrl: string, target: string, options: { method?: string, headers?: Record<string, string> } = {}): Promise<RawResponse> {
  const { hostname, port } = new URL(baseUrl)
  return new Promise((resolve, reject) => {
    const req = request({ host: hostname, port, path: target, method: options.method ?? 'GET', headers: options.headers, agent: false }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }))
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end()
  })
}

/** Write raw bytes on a fresh TCP connection and return the status code of the reply. */
export function rawSocketStatus (baseUrl: string, text: string): Promise<number> {
  const { hostname, port } = new URL(baseUrl)
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => socket.end(text))
    const chunks: Buffer[] = []
    socket.on('data', (c: Buffer) => chunks.push(c))
    socket.on('error', reject)
    socket.on('close', () => {
      const m = /^HTTP\/1\.1 (\d{3})/.exec(Buffer.concat(chunks).toString('latin1'))
      resolve(m ? Number(m[1]) : 0)
    })
  })
}

/** One logged request, as the server writes it. */
export interface LoggedRequest {
  method: string
  target: string
  status: number
  bytes: number
  range?: string
  reason?: string
  complete?: boolean
}

/** A logger that keeps the parsed lines. */
export function logCollector (): { lines: LoggedRequest[], log: (line: string) => void } {
  const lines: LoggedRequest[] = []
  return { lines, log: (line) => lines.push(JSON.parse(line) as LoggedRequest) }
}

/** What the proxy does with one request: pass it, answer a status itself, or cut the body after N bytes. */
export interface ProxyPlan {
  status?: number
  cutAfter?: number
}

/** One request seen by the proxy, with the body bytes it passed on. */
export interface ProxyRecord {
  target: string
  range?: string
  ifRange?: string
  status: number
  forwarded: number
}

/** A running proxy. */
export interface Proxy {
  url: string
  records: ProxyRecord[]
  close: () => Promise<void>
}

/**
 * An HTTP proxy in front of `upstream`. `plan` sees each request (and how many earlier requests had
 * the same target) and decides. A cut writes exactly `cutAfter` body bytes, then ends the socket.
 */
export async function startProxy (upstream: string, plan: (record: ProxyRecord, seenBefore: number) => ProxyPlan | undefined = () => undefined): Promise<Proxy> {
  const records: ProxyRecord[] = []
  const server = createServer((req, res) => {
    res.on('error', () => undefined)
    const record: ProxyRecord = {
      target: req.url ?? '',
      range: req.headers.range,
      ifRange: req.headers['if-range'] as string | undefined,
      status: 0,
      forwarded: 0,
    }
    const seenBefore = records.filter((r) => r.target === record.target).length
    records.push(record)
    const decision = plan(record, seenBefore)
    if (decision?.status !== undefined) {
      record.status = decision.status
      res.writeHead(decision.status, { 'content-length': '0' })
      res.end()
      return
    }
    const up = request(upstream + (req.url ?? ''), { method: req.method, headers: req.headers, agent: false }, (upRes) => {
      record.status = upRes.statusCode ?? 0
      res.writeHead(record.status, upRes.headers)
      let cutting = false
      upRes.on('data', (chunk: Buffer) => {
        if (cutting) return
        const room = decision?.cutAfter === undefined ? Infinity : decision.cutAfter - record.forwarded
        if (chunk.length < room) {
          record.forwarded += chunk.length
          res.write(chunk)
          return
        }
        cutting = true
        const part = chunk.subarray(0, room)
        record.forwarded += part.length
        upRes.destroy()
        // end(), not destroy(): the bytes written so far reach the client, then the connection closes.
        res.write(part, () => res.socket?.end())
      })
      upRes.on('end', () => { if (!cutting) res.end() })
    })
    up.on('error', () => res.destroy())
    up.end()
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    records,
    close: () => new Promise<void>((resolve) => {
      server.close(() => resolve())
      server.closeAllConnections()
    }),
  }
}

/** The test's standard request: the fields a capture and a client must agree on. */
export function requestFor (requestId: string, numLayers = 3): CaptureStart {
  return { requestId, tokenCount: 4096, sidecarFingerprint: 'geom-7f3a', profile: 'decoder', numLayers }
}

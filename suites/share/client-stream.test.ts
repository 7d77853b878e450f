// streamCapture against a real share on 127.0.0.1: layers delivered as they land, in order and
// verified; mismatched or tampered captures refused; failed captures, deadlines, aborts and
// transient errors handled as documented.
import { readFileSync, renameSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ConfigError } from '../../src/errors.ts'
import { addLayerFile, finishManifest, startCapture } from '../../src/capture/manifest-updates.ts'
import { CAPTURE_FORMAT, CaptureManifestError, encodeManifest, readManifest, writeManifestAtomic } from '../../src/wire/manifest.ts'
import {
  CaptureFailedError, ChecksumError, ShareAbortedError, ShareDeadlineError, ShareHttpError, ShareStallError, startShareServer, streamCapture,
  type ShareClientEvent, type ShareServer, type StreamCaptureOptions,
} from '../../src/share/index.ts'
import { layerBytes, logCollector, makeCapture, requestFor, startProxy, tempDir } from './helpers.ts'

const tmp = tempDir('client')
const logs = logCollector()
let server: ShareServer
beforeAll(async () => { server = await startShareServer({ root: tmp.dir, log: logs.log }) })
afterAll(async () => {
  await server.close()
  tmp.remove()
})

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))
const fast = { attempts: 4, baseDelayMs: 5, maxDelayMs: 20 }

/** Stream `requestId` with the standard request, collecting deliveries. */
function stream (requestId: string, extra: Partial<StreamCaptureOptions> = {}) {
  const delivered: Array<{ index: number, bytes: Uint8Array, at: number }> = []
  const promise = streamCapture({
    ...requestFor(requestId),
    baseUrl: server.url,
    pollMs: 10,
    deadlineMs: 20_000,
    retry: fast,
    onLayer: (index, bytes) => { delivered.push({ index, bytes, at: performance.now() }) },
    ...extra,
  })
  return { delivered, promise }
}

async function rejection (p: Promise<unknown>): Promise<unknown> {
  return p.then(() => { throw new Error('expected a rejection') }, (e: unknown) => e)
}

describe('layers that appear over time are delivered as they land, in order', () => {
  it('delivers layer 0 before the writer has finished, every layer exactly, then resolves done', async () => {
    const numLayers = 5
    const s = stream('over-time', { ...requestFor('over-time', numLayers) })
    await sleep(40) // the client polls a manifest that does not exist yet (404) first
    const dir = await startCapture(tmp.dir, requestFor('over-time', numLayers))
    const written: Uint8Array[] = []
    const landedAt: number[] = []
    for (let i = 0; i < numLayers; i++) {
      await sleep(60)
      written.push(layerBytes(i, 500))
      await addLayerFile(dir, i, written[i])
      landedAt.push(performance.now())
    }
    await sleep(30)
    await finishManifest(dir, 'done', { timings: { prefill: 7 } })
    const result = await s.promise

    expect(s.delivered.map((d) => d.index)).toEqual([0, 1, 2, 3, 4])
    for (const d of s.delivered) expect(Buffer.compare(Buffer.from(d.bytes), Buffer.from(written[d.index]))).toBe(0)
    // Streaming, not batch: the first layer arrived before the last one was even written.
    expect(s.delivered[0].at).toBeLessThan(landedAt[numLayers - 1])
    expect(result).toMatchObject({ state: 'done', sealedLength: 4096, layers: 5 })
    expect(result.bytes).toBe(written.reduce((n, b) => n + b.length, 0))
    expect(result.fetchedBytes).toBe(result.bytes)
    expect(result.manifest.timings).toEqual({ prefill: 7 })
    expect(result.timings.totalMs).toBeGreaterThan(0)
    expect(result.timings.firstLayerMs).toBeLessThan(result.timings.totalMs)
    // Polls used If-None-Match: unchanged manifests came back 304; each layer was fetched once.
    const mine = logs.lines.filter((l) => l.target.startsWith('/captures/over-time/'))
    expect(mine.some((l) => l.target.endsWith('manifest.json') && l.status === 304)).toBe(true)
    expect(mine.some((l) => l.target.endsWith('manifest.json') && l.status === 404)).toBe(true)
    for (let i = 0; i < numLayers; i++) expect(mine.filter((l) => l.target.endsWith(`layer-00${i}.safetensors`))).toHaveLength(1)
  })

  it('waits for a gap to fill: layers written 1, 0, 2 are delivered 0, 1, 2', async () => {
    const s = stream('gap')
    const dir = await startCapture(tmp.dir, requestFor('gap'))
    await addLayerFile(dir, 1, layerBytes(1))
    await sleep(60)
    expect(s.delivered).toEqual([])
    await addLayerFile(dir, 0, layerBytes(0))
    await addLayerFile(dir, 2, layerBytes(2))
    await finishManifest(dir, 'done')
    await s.promise
    expect(s.delivered.map((d) => d.index)).toEqual([0, 1, 2])
  })

  it('resolves partial with T\' when the capture sealed a prefix', async () => {
    await makeCapture(tmp.dir, requestFor('partial'), { state: 'partial', sealedLength: 3000 })
    const s = stream('partial')
    const result = await s.promise
    expect([result.state, result.sealedLength, result.layers]).toEqual(['partial', 3000, 3])
    expect(s.delivered).toHaveLength(3)
  })
})

describe('a manifest that does not match the request is rejected before any layer is delivered', () => {
  it('T mismatch', async () => {
    await makeCapture(tmp.dir, requestFor('t-mismatch'))
    const s = stream('t-mismatch', { tokenCount: 8192 })
    const e = await rejection(s.promise)
    expect(e).toBeInstanceOf(CaptureManifestError)
    expect((e as CaptureManifestError).field).toBe('tokenCount')
    expect((e as CaptureManifestError).message).toContain('T is 4096 in the manifest but the request has 8192')
    expect(s.delivered).toEqual([])
  })

  it('fingerprint mismatch', async () => {
    await makeCapture(tmp.dir, requestFor('fp-mismatch'))
    const s = stream('fp-mismatch', { sidecarFingerprint: 'geom-new-window' })
    const e = await rejection(s.promise)
    expect((e as CaptureManifestError).field).toBe('sidecarFingerprint')
    expect(s.delivered).toEqual([])
  })

  it('a running manifest with the wrong T is refused at once, not after waiting for done', async () => {
    // The manifest stays running forever: a client that waited for done would never settle.
    await makeCapture(tmp.dir, requestFor('t-running'), { state: 'running' })
    const e = await rejection(stream('t-running', { tokenCount: 1 }).promise)
    expect((e as CaptureManifestError).field).toBe('tokenCount')
  })

  it('a "done" manifest that breaks the rules (a layer missing) is never trusted', async () => {
    const { dir } = await makeCapture(tmp.dir, requestFor('bad-done'), { state: 'running' })
    // Hand-written, as a buggy hook would: done, but layer 1 not listed.
    const m = await readManifest(dir)
    const lying = { ...m, state: 'done' as const, sealedLength: m.tokenCount, layers: [m.layers[0], m.layers[2]] }
    lying.payloadBytes = lying.layers.reduce((n, e) => n + e.bytes, 0)
    writeFileSync(join(dir, 'manifest.json'), encodeManifest(lying))
    const s = stream('bad-done')
    const e = await rejection(s.promise)
    expect(e).toBeInstanceOf(CaptureManifestError)
    expect((e as CaptureManifestError).message).toContain('missing 1')
    expect(s.delivered).toEqual([])
  })

  it('a manifest that rewrites a layer it already listed is refused', async () => {
    const dir = await startCapture(tmp.dir, requestFor('rewrite'))
    await addLayerFile(dir, 0, layerBytes(0))
    const s = stream('rewrite', {
      onLayer: async () => {
        const m = await readManifest(dir)
        m.layers[0] = { ...m.layers[0], sha256: 'f'.repeat(64) }
        await writeManifestAtomic(dir, m)
      },
    })
    const e = await rejection(s.promise)
    expect(e).toBeInstanceOf(CaptureManifestError)
    expect((e as CaptureManifestError).message).toContain('layer 0 changed after it was listed')
  })

  it('another format version is named', async () => {
    const { dir } = await makeCapture(tmp.dir, requestFor('v2'))
    const text = readFileSync(join(dir, 'manifest.json'), 'utf8').replace(CAPTURE_FORMAT, 'pd-bridge-capture/2')
    writeFileSync(join(dir, 'manifest.json'), text)
    const e = await rejection(stream('v2').promise)
    expect((e as CaptureManifestError).field).toBe('format')
    expect((e as Error).message).toContain('pd-bridge-capture/2')
  })
})

describe('a layer whose bytes differ from its manifest entry is never delivered', () => {
  it('same size, one byte flipped: ChecksumError naming the file', async () => {
    const { dir } = await makeCapture(tmp.dir, requestFor('tampered'))
    const path = join(dir, 'layer-001.safetensors')
    const bytes = readFileSync(path)
    bytes[bytes.length - 1] ^= 0x01
    writeFileSync(path, bytes)
    const s = stream('tampered')
    const e = await rejection(s.promise)
    expect(e).toBeInstanceOf(ChecksumError)
    expect((e as ChecksumError).file).toBe('tampered/layer-001.safetensors')
    expect((e as Error).message).toContain('SHA-256 of the downloaded bytes')
    expect(s.delivered.map((d) => d.index)).toEqual([0])
  })

  it('a different size: ChecksumError before the body is read', async () => {
    const { dir } = await makeCapture(tmp.dir, requestFor('resized'))
    const path = join(dir, 'layer-000.safetensors')
    writeFileSync(path + '.new', Buffer.concat([readFileSync(path), Buffer.from([0])]))
    renameSync(path + '.new', path)
    const s = stream('resized')
    const e = await rejection(s.promise)
    expect(e).toBeInstanceOf(ChecksumError)
    expect((e as Error).message).toMatch(/the server has \d+ bytes, the manifest lists \d+/)
    expect(s.delivered).toEqual([])
  })
})

describe('a failed capture rejects with the recorded error', () => {
  it('CaptureFailedError carries the hook\'s message', async () => {
    await makeCapture(tmp.dir, { ...requestFor('failed'), numLayers: 2 }, { state: 'failed', error: 'CUDA out of memory at layer 1' })
    const e = await rejection(stream('failed', requestFor('failed', 2)).promise)
    expect(e).toBeInstanceOf(CaptureFailedError)
    expect((e as CaptureFailedError).recordedError).toBe('CUDA out of memory at layer 1')
  })
})

describe('deadline and abort', () => {
  it('a capture that never seals rejects with ShareDeadlineError after deadlineMs', async () => {
    await makeCapture(tmp.dir, requestFor('stuck'), { state: 'running' })
    const t0 = performance.now()
    const s = stream('stuck', { deadlineMs: 300 })
    const e = await rejection(s.promise)
    const elapsed = performance.now() - t0
    expect(e).toBeInstanceOf(ShareDeadlineError)
    expect((e as Error).message).toContain('manifest running, 3/3 layers listed, 3 delivered')
    // Not before the deadline (timers never fire early); the capture never seals, so settling at all
    // is the deadline's doing (no upper bound in wall-clock time: two cores are shared).
    expect(elapsed).toBeGreaterThanOrEqual(295)
  })

  it('a manifest that never appears also ends at the deadline', async () => {
    const e = await rejection(stream('never', { deadlineMs: 200 }).promise)
    expect(e).toBeInstanceOf(ShareDeadlineError)
    expect((e as Error).message).toContain('no manifest seen')
  })

  it('the caller\'s signal stops it with ShareAbortedError', async () => {
    await makeCapture(tmp.dir, requestFor('aborted'), { state: 'running' })
    const controller = new AbortController()
    const s = stream('aborted', { signal: controller.signal })
    setTimeout(() => controller.abort(), 100)
    expect(await rejection(s.promise)).toBeInstanceOf(ShareAbortedError)
    const pre = new AbortController()
    pre.abort()
    expect(await rejection(stream('aborted', { signal: pre.signal }).promise)).toBeInstanceOf(ShareAbortedError)
  })
})

describe('the stall deadline counts only the share\'s silence', () => {
  it('a share that accepts and never answers: ShareStallError, not the total deadline', async () => {
    // A real server on 127.0.0.1 that takes every request and answers none (a stopped share).
    const silent = createServer(() => {})
    silent.listen(0, '127.0.0.1')
    await new Promise((resolve) => silent.once('listening', resolve))
    try {
      const e = await rejection(stream('silent', { baseUrl: `http://127.0.0.1:${(silent.address() as AddressInfo).port}`, stallMs: 300, deadlineMs: 600_000 }).promise)
      expect(e).toBeInstanceOf(ShareStallError)
      expect((e as Error).message).toBe('capture silent: nothing from the share for 300 ms (no manifest seen, 0 delivered)')
    } finally {
      silent.closeAllConnections()
      await new Promise((resolve) => silent.close(resolve))
    }
  })

  it('a share that answers every poll is not stalled, even with polls further apart than stallMs', async () => {
    await makeCapture(tmp.dir, requestFor('slow-engine'), { state: 'running' })
    const e = await rejection(stream('slow-engine', { pollMs: 1500, stallMs: 1000, deadlineMs: 4000 }).promise)
    expect(e).toBeInstanceOf(ShareDeadlineError)
  })
})

describe('transient errors are retried with bounded backoff', () => {
  it('two 503s on the manifest and one on a layer are ridden out', async () => {
    await makeCapture(tmp.dir, requestFor('flaky'))
    const proxy = await startProxy(server.url, (r, seen) => {
      if (r.target.endsWith('manifest.json') && seen < 2) return { status: 503 }
      if (r.target.endsWith('layer-002.safetensors') && seen === 0) return { status: 502 }
      return undefined
    })
    const events: ShareClientEvent[] = []
    try {
      const s = stream('flaky', { baseUrl: proxy.url, onEvent: (e) => events.push(e) })
      expect((await s.promise).layers).toBe(3)
      expect(events.filter((e) => e.event === 'retry').map((e) => (e as { reason: string }).reason)).toEqual(['HTTP 503', 'HTTP 503', 'HTTP 502'])
    }
    finally {
      await proxy.close()
    }
  })

  it('gives up after retry.attempts failures in a row with ShareHttpError', async () => {
    await makeCapture(tmp.dir, requestFor('down'))
    const proxy = await startProxy(server.url, (r) => (r.target.endsWith('layer-000.safetensors') ? { status: 503 } : undefined))
    try {
      const e = await rejection(stream('down', { baseUrl: proxy.url }).promise)
      expect(e).toBeInstanceOf(ShareHttpError)
      expect((e as ShareHttpError).status).toBe(503)
      expect((e as Error).message).toContain('gave up after 4 failures in a row')
      expect(proxy.records.filter((r) => r.target.endsWith('layer-000.safetensors'))).toHaveLength(4)
    }
    finally {
      await proxy.close()
    }
  })

  it('a share that is not listening at all ends in ShareHttpError, not a raw TypeError', async () => {
    const gone = await startShareServer({ root: tmp.dir, log: () => undefined })
    await gone.close()
    const e = await rejection(stream('anything', { baseUrl: gone.url }).promise)
    expect(e).toBeInstanceOf(ShareHttpError)
    expect((e as Error).message).toMatch(/ECONNREFUSED/)
  })

  it('a refusal (403) is not retried', async () => {
    const proxy = await startProxy(server.url, () => ({ status: 403 }))
    try {
      const e = await rejection(stream('refused', { baseUrl: proxy.url }).promise)
      expect((e as ShareHttpError).status).toBe(403)
      expect(proxy.records).toHaveLength(1)
    }
    finally {
      await proxy.close()
    }
  })
})

describe('options are checked before anything is fetched', () => {
  it.each([
    ['baseUrl', { baseUrl: 'not a url' }],
    ['baseUrl', { baseUrl: 'ftp://127.0.0.1/' }],
    ['tokenCount', { tokenCount: 0 }],
    ['requestId', { requestId: '../x' }],
    ['pollMs', { pollMs: 0 }],
    ['deadlineMs', { deadlineMs: Number.NaN }],
  ])('%s', async (field, bad) => {
    const e = await rejection(stream('opts', bad as Partial<StreamCaptureOptions>).promise)
    expect(e).toBeInstanceOf(ConfigError)
    expect((e as ConfigError).field).toBe(field)
  })
})

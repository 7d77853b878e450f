// Resume after a dropped connection: a proxy cuts the first response for one layer after exactly N
// body bytes; the client must ask for `bytes=N-` with If-Range, so the bytes served for that file
// add up to its size once, not one and a bit. A file replaced meanwhile must restart from 0.
import { renameSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startShareServer, streamCapture, type ShareClientEvent, type ShareServer } from '../../src/share/index.ts'
import { makeCapture, requestFor, startProxy, tempDir, type MadeCapture, type ProxyRecord } from './helpers.ts'

const tmp = tempDir('resume')
let server: ShareServer
beforeAll(async () => { server = await startShareServer({ root: tmp.dir, log: () => undefined }) })
afterAll(async () => {
  await server.close()
  tmp.remove()
})

const CUT = 100_003 // an odd byte count, well inside a chunk, so nothing lines up by luck
const FLOATS = 64 * 1024 // 256 KiB of data per layer

async function run (requestId: string, baseUrl: string, events: ShareClientEvent[]) {
  const delivered: Uint8Array[] = []
  const result = await streamCapture({
    ...requestFor(requestId),
    baseUrl,
    pollMs: 10,
    deadlineMs: 20_000,
    retry: { attempts: 4, baseDelayMs: 5, maxDelayMs: 20 },
    onLayer: (index, bytes) => { delivered[index] = bytes },
    onEvent: (e) => events.push(e),
  })
  return { delivered, result }
}

function recordsFor (records: ProxyRecord[], file: string): ProxyRecord[] {
  return records.filter((r) => r.target.endsWith(file))
}

describe('a download cut mid-body resumes with Range from the byte reached', () => {
  let capture: MadeCapture
  beforeAll(async () => { capture = await makeCapture(tmp.dir, requestFor('cut-1'), { state: 'done' }, FLOATS) })

  it('fetches only the rest, and delivers the exact file', async () => {
    const size = capture.layers[1].length
    expect(size).toBeGreaterThan(2 * CUT)
    const proxy = await startProxy(server.url, (r, seen) => (r.target.endsWith('layer-001.safetensors') && seen === 0 ? { cutAfter: CUT } : undefined))
    const events: ShareClientEvent[] = []
    try {
      const { delivered, result } = await run('cut-1', proxy.url, events)
      const served = recordsFor(proxy.records, 'layer-001.safetensors')
      expect(served.map((r) => [r.status, r.range, r.forwarded])).toEqual([
        [200, undefined, CUT],
        [206, `bytes=${CUT}-`, size - CUT],
      ])
      // If-Range carried the ETag of the first response.
      expect(served[1].ifRange).toMatch(/^"[0-9a-f-]+"$/)
      // Bytes served for the file add up to its size: nothing fetched twice.
      expect(served.reduce((n, r) => n + r.forwarded, 0)).toBe(size)
      expect(result.fetchedBytes).toBe(result.bytes)
      for (let i = 0; i < 3; i++) expect(Buffer.compare(Buffer.from(delivered[i]), Buffer.from(capture.layers[i]))).toBe(0)
      expect(events.some((e) => e.event === 'resume' && e.from === CUT)).toBe(true)
      // The other layers went through in one request each.
      expect(recordsFor(proxy.records, 'layer-000.safetensors')).toHaveLength(1)
      expect(recordsFor(proxy.records, 'layer-002.safetensors')).toHaveLength(1)
    }
    finally {
      await proxy.close()
    }
  })

  it('survives a cut on the resumed request too (resuming from the new byte reached)', async () => {
    const size = capture.layers[2].length
    const proxy = await startProxy(server.url, (r, seen) => (r.target.endsWith('layer-002.safetensors') && seen < 2 ? { cutAfter: CUT } : undefined))
    try {
      const { delivered } = await run('cut-1', proxy.url, [])
      const served = recordsFor(proxy.records, 'layer-002.safetensors')
      expect(served.map((r) => [r.status, r.range, r.forwarded])).toEqual([
        [200, undefined, CUT],
        [206, `bytes=${CUT}-`, CUT],
        [206, `bytes=${2 * CUT}-`, size - 2 * CUT],
      ])
      expect(Buffer.compare(Buffer.from(delivered[2]), Buffer.from(capture.layers[2]))).toBe(0)
    }
    finally {
      await proxy.close()
    }
  })
})

describe('a file that changed before the resume is fetched again from byte 0', () => {
  it('If-Range does not match the new ETag, the server sends 200 and the client starts over', async () => {
    const capture = await makeCapture(tmp.dir, requestFor('cut-2'), { state: 'done' }, FLOATS)
    const path = join(capture.dir, 'layer-000.safetensors')
    const size = capture.layers[0].length
    const proxy = await startProxy(server.url, (r, seen) => {
      if (!r.target.endsWith('layer-000.safetensors')) return undefined
      if (seen === 1) {
        // Between the cut and the resume: same bytes, new file (new inode, so a new ETag).
        writeFileSync(path + '.tmp', capture.layers[0])
        renameSync(path + '.tmp', path)
      }
      return seen === 0 ? { cutAfter: CUT } : undefined
    })
    const events: ShareClientEvent[] = []
    try {
      const { delivered, result } = await run('cut-2', proxy.url, events)
      const served = recordsFor(proxy.records, 'layer-000.safetensors')
      expect(served.map((r) => [r.status, r.range, r.forwarded])).toEqual([
        [200, undefined, CUT],
        [200, `bytes=${CUT}-`, size],
      ])
      expect(events.some((e) => e.event === 'restart')).toBe(true)
      expect(Buffer.compare(Buffer.from(delivered[0]), Buffer.from(capture.layers[0]))).toBe(0)
      // The discarded prefix is counted as fetched, not as delivered.
      expect(result.fetchedBytes).toBe(result.bytes + CUT)
    }
    finally {
      await proxy.close()
    }
  })
})

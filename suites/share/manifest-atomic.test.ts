// Manifest writes are atomic: readers polling while many writes land (a worker thread reading
// synchronously, truly in parallel, and the main thread's own validating reads) never see a torn,
// missing or invalid manifest, and no temporary file outlives a write.
import { readdirSync } from 'node:fs'
import { Worker } from 'node:worker_threads'
import { afterAll, describe, expect, it } from 'vitest'
import { addLayerFile, finishManifest, startCapture } from '../../src/capture/manifest-updates.ts'
import { readManifest } from '../../src/wire/manifest.ts'
import { layerBytes, requestFor, tempDir } from './helpers.ts'

const tmp = tempDir('atomic')
afterAll(tmp.remove)

// Plain JavaScript so the worker needs no loader: read, parse, check the invariants a torn or
// half-written file would break (sum of layer sizes, layers only ever growing), count.
const READER = `
const { readFileSync } = require('node:fs')
const { workerData, parentPort } = require('node:worker_threads')
const stop = new Int32Array(workerData.stop)
let reads = 0, failures = [], lastCount = 0
while (Atomics.load(stop, 0) === 0) {
  try {
    const m = JSON.parse(readFileSync(workerData.path, 'utf8'))
    const sum = m.layers.reduce((s, e) => s + e.bytes, 0)
    if (sum !== m.payloadBytes) failures.push('payloadBytes ' + m.payloadBytes + ' != ' + sum)
    if (m.layers.length < lastCount) failures.push('layers went from ' + lastCount + ' to ' + m.layers.length)
    lastCount = m.layers.length
    reads++
  } catch (e) {
    failures.push(String(e && e.message))
  }
}
parentPort.postMessage({ reads, failures: failures.slice(0, 5), failureCount: failures.length, lastCount })
`

describe('a reader polling during many manifest writes', () => {
  it('never sees a torn or invalid manifest', async () => {
    const layers = 120
    const dir = await startCapture(tmp.dir, requestFor('atomic-1', layers))
    const stop = new SharedArrayBuffer(4)
    const worker = new Worker(READER, { eval: true, workerData: { path: `${dir}/manifest.json`, stop } })
    const done = new Promise<{ reads: number, failures: string[], failureCount: number, lastCount: number }>((resolve, reject) => {
      worker.once('message', resolve)
      worker.once('error', reject)
    })

    let mainReads = 0
    let writing = true
    const mainReader = (async () => {
      let last = 0
      while (writing) {
        const m = await readManifest(dir)
        expect(m.layers.length).toBeGreaterThanOrEqual(last)
        last = m.layers.length
        mainReads++
      }
    })()

    const small = layerBytes(0, 4)
    for (let i = 0; i < layers; i++) await addLayerFile(dir, i, i === 0 ? small : layerBytes(i, 4))
    await finishManifest(dir, 'done')
    writing = false
    await mainReader
    Atomics.store(new Int32Array(stop), 0, 1)
    const result = await done
    await worker.terminate()

    expect(result.failures).toEqual([])
    expect(result.failureCount).toBe(0)
    expect(result.lastCount).toBe(layers)
    // The readers really overlapped the writes (many reads, in both threads).
    expect(result.reads).toBeGreaterThan(layers)
    expect(mainReads).toBeGreaterThan(10)
    expect((await readManifest(dir)).state).toBe('done')
    expect(readdirSync(dir).filter((f) => f.includes('.partial-'))).toEqual([])
  })
})

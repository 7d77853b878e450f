// Threads split output ranges only (native/src/parallel.cc), so a product never depends on how many
// threads ran it or on what else calls the addon at the time: every product here equals the
// one-thread result bit for bit, over many calls as the thread count changes, and from four worker
// threads and the main thread calling at once.
import { Worker } from 'node:worker_threads'
import { afterAll, describe, expect, it } from 'vitest'
import { getKernelThreads, matmulF32, setKernelThreads } from '../../src/kernels/index.ts'
import { makeRng } from './fixtures.ts'

const defaultThreads = getKernelThreads()
afterAll(() => setKernelThreads(defaultThreads))

// Large enough to pass the parallel threshold (2^20 multiply-adds): 16 x 256 x 512.
const M = 16
const K = 256
const N = 512

function operands (seed: number): { x: Float32Array, w: Float32Array } {
  const rng = makeRng(seed)
  const x = new Float32Array(M * K)
  const w = new Float32Array(N * K)
  for (let i = 0; i < x.length; i++) x[i] = rng() * 2 - 1
  for (let i = 0; i < w.length; i++) w[i] = rng() * 2 - 1
  return { x, w }
}

function oneThread (x: Float32Array, w: Float32Array): Float32Array {
  setKernelThreads(1)
  const out = matmulF32(x, M, K, w, N)
  setKernelThreads(defaultThreads)
  return out
}

describe('kernel calls in a row and at once', () => {
  it('gives the one-thread bits over many calls, as its thread count changes', () => {
    const { x, w } = operands(1)
    const expected = oneThread(x, w)
    for (const threads of [2, 7, 3, 16, 2, 5]) {
      setKernelThreads(threads)
      for (let call = 0; call < 20; call++) expect(new Uint32Array(matmulF32(x, M, K, w, N).buffer)).toEqual(new Uint32Array(expected.buffer))
    }
  })

  it('gives the one-thread bits to four worker threads and the main thread calling at once', async () => {
    setKernelThreads(4)
    const source = `
      const { parentPort, workerData } = require('node:worker_threads')
      const addon = require(workerData.addon)
      addon.setThreads(4)
      const { x, w, m, k, n, calls } = workerData
      let out
      for (let c = 0; c < calls; c++) out = addon.matmulF32(x, m, k, w, n, new Float32Array(m * n), false, 0)
      parentPort.postMessage(out)
    `
    const { DEFAULT_ADDON_PATH } = await import('../../src/kernels/native.ts')
    const jobs = [11, 12, 13, 14].map((seed) => ({ seed, ...operands(seed) }))
    const results = jobs.map(({ x, w }) => new Promise<Float32Array>((resolve, reject) => {
      const worker = new Worker(source, { eval: true, workerData: { addon: DEFAULT_ADDON_PATH, x, w, m: M, k: K, n: N, calls: 200 } })
      worker.once('message', resolve)
      worker.once('error', reject)
    }))
    // The main thread calls meanwhile.
    const mine = operands(15)
    const mineExpected = oneThread(mine.x, mine.w)
    setKernelThreads(4)
    for (let call = 0; call < 200; call++) expect(new Uint32Array(matmulF32(mine.x, M, K, mine.w, N).buffer)).toEqual(new Uint32Array(mineExpected.buffer))
    const outs = await Promise.all(results)
    for (const [i, { x, w }] of jobs.entries()) expect(new Uint32Array(outs[i].buffer)).toEqual(new Uint32Array(oneThread(x, w).buffer))
  })
})

// Boundary snapshots in the capture: at every multiple b of the sidecar's block size up to T', each
// layer file holds the layer's window, buffers and carries at b (`layers.{i}.boundary.{b}.*`),
// equal bit for bit to the decoder's own cache after a native prefill of b tokens; the final state
// is unchanged by the internal split at b; the payload report and the held-bytes count include the
// snapshots, and the budget still holds with them.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CaptureSession, mountCapture, readCapture } from '../../src/capture/index.ts'
import { decodeLayerFile } from '../../src/wire/layer-file.ts'
import { layerFileName } from '../../src/wire/manifest.ts'
import { BS, bench, cacheDifferences, capture, prompt, sameBits, type Bench } from './helpers.ts'
import type { DumpTensor } from '../../src/model/engine/index.ts'

let b: Bench
beforeAll(async () => { b = await bench('blocks-bridge-snapshots') })
afterAll(async () => await b.cleanup())

function layerFile (dir: string, i: number): Map<string, DumpTensor> {
  const path = join(dir, layerFileName(i))
  return decodeLayerFile(new Uint8Array(readFileSync(path)), path).tensors
}

function same (a: DumpTensor, c: DumpTensor): boolean {
  if (a.dtype !== c.dtype || a.shape.join(',') !== c.shape.join(',')) return false
  return a.dtype === 'I64' ? a.data[0] === c.data[0] : sameBits(a.data, c.data as Float32Array)
}

describe('boundary snapshots in the layer files', () => {
  const T = 700
  const tokens = prompt(T, 11)

  it.each([['whole prompt', T], ['100-token chunks', 100]])('at 256 and 512 equal the native cache there, bit for bit (%s)', async (_, maxChunk) => {
    const c = await capture(b, tokens, { requestId: `snap-${maxChunk}`, maxChunk })
    const engine = b.engine('decoder')
    for (const boundary of [256, 512]) {
      const at = engine.newCache()
      engine.prefill(tokens.slice(0, boundary), at, { logits: 'none' })
      const expected = at.tensors('x')
      for (let i = 0; i < 4; i++) {
        const file = layerFile(c.dir, i)
        const prefix = `layers.${i}.boundary.${boundary}.`
        const got = new Map([...file].filter(([name]) => name.startsWith(prefix)).map(([name, t]) => [name.slice(prefix.length), t]))
        const want = new Map([...expected].filter(([name]) => name.startsWith(`x.layers.${i}.`) && !name.endsWith('.compressed_kv')).map(([name, t]) => [name.slice(`x.layers.${i}.`.length), t]))
        // Besides the dump's arrays, a snapshot keeps the raw previous window (what oMLX's blocks store).
        for (const [pool, s] of [['compressor', at.layers[i].compressor], ['indexer', at.layers[i].indexer]] as const) {
          if (s === null || s.prevWindowKv === null || s.prevWindowGate === null) continue
          want.set(`${pool}.prev_window_kv`, { dtype: 'F32', shape: [s.ratio, s.width], data: s.prevWindowKv })
          want.set(`${pool}.prev_window_gate`, { dtype: 'F32', shape: [s.ratio, s.width], data: s.prevWindowGate })
        }
        expect([...got.keys()].sort()).toEqual([...want.keys()].sort())
        for (const [name, t] of want) expect(same(got.get(name)!, t), `layer ${i} ${name} at ${boundary}`).toBe(true)
      }
    }
    // No other boundary is recorded, and every file says its snapshot interval.
    for (let i = 0; i < 4; i++) {
      const boundaries = new Set([...layerFile(c.dir, i).keys()].flatMap((name) => /\.boundary\.(\d+)\./.exec(name)?.[1] ?? []))
      expect([...boundaries].sort()).toEqual(['256', '512'])
    }
    // The split at each boundary leaves the final state as it was: the capture mounts as the native cache at T.
    const read = await readCapture(c.dir)
    const full = engine.newCache()
    engine.prefill(tokens, full, { logits: 'none' })
    expect(cacheDifferences(mountCapture(read.tensors, b.sidecar, T), full)).toEqual([])
    expect(read.layers.map((m) => m.blockSize)).toEqual([BS, BS, BS, BS])
  })

  it('a capture shorter than one block holds none and no block_size', async () => {
    const c = await capture(b, prompt(200, 12), { requestId: 'short' })
    const read = await readCapture(c.dir)
    expect([...read.tensors.keys()].filter((name) => name.includes('.boundary.'))).toEqual([])
    expect(read.layers.map((m) => m.blockSize)).toEqual([undefined, undefined, undefined, undefined])
    expect(c.report.boundarySnapshots).toEqual({ blockSize: BS, boundaries: 0, bytes: 0 })
  })

  it('the payload report counts them: the files hold the minimum plus the snapshots plus headers (under 2%)', async () => {
    const c = await capture(b, tokens, { requestId: 'report' })
    // Per boundary, at bf16: 4 windows of 127 x 128, and per CSA layer (1 and 3) two pools' carries,
    // kv and gate [4, 128] each, and their previous windows, kv and gate [4, 256] each; 256 is a
    // multiple of 4 and 128, so no buffered tokens.
    const perBoundary = (4 * 127 * 128 + 2 * 2 * 2 * 4 * 128 + 2 * 2 * 2 * 4 * 256) * 2
    expect(c.report.boundarySnapshots).toEqual({ blockSize: BS, boundaries: 2, bytes: 2 * perBoundary })
    expect(c.report.overRequired).toBeGreaterThan(1)
    expect(c.report.overRequired).toBeLessThan(1.02)
    expect(c.report.overMinimum).toBeGreaterThan(1.5)
  })
})

describe('held bytes with snapshots', () => {
  const hidden = 256
  const rows = (count: number, seed: number): Float32Array => Float32Array.from({ length: count * hidden }, (_, i) => Math.sin(seed * 7919 + i) / 4)

  it('count each live layer\'s snapshots: a sliding layer at 300 holds its window and the window at 256', async () => {
    const session = await CaptureSession.start({ sidecar: b.sidecar, captureRoot: b.root, requestId: 'held', tokenCount: 600 })
    session.onAttentionInput(0, 0, rows(300, 1), 300)
    // Layer 0 is sliding: 127 window rows of 128 now, and 127 more in the snapshot at 256 (float32).
    expect(session.heldBytes).toBe((127 * 128 + 127 * 128) * 4)
    session.onAttentionInput(0, 300, rows(300, 2), 300)
    // Written at 600 (= T) and released, snapshots and all.
    expect(session.heldBytes).toBe(0)
    await session.fail(new Error('test over'))
  })

  it('the budget holds with them: a sealed prefix, peak under the budget, snapshots only up to T\'', async () => {
    const T = 1100
    const budget = 900_000
    const c = await capture(b, prompt(T, 13), { requestId: 'budget', memoryBudgetBytes: budget, maxChunk: 128 })
    expect(c.manifest.state).toBe('partial')
    const sealed = c.manifest.sealedLength
    expect(sealed).toBeLessThan(T)
    expect(c.report.peakHeldBytes).toBeLessThanOrEqual(budget)
    const read = await readCapture(c.dir)
    const boundaries = new Set([...read.tensors.keys()].flatMap((name) => /\.boundary\.(\d+)\./.exec(name)?.[1] ?? []).map(Number))
    expect([...boundaries].sort((x, y) => x - y)).toEqual(Array.from({ length: Math.floor(sealed / BS) }, (_, k) => (k + 1) * BS))
  })
})

// The engine's pieces on their own: cache objects, the compressor's window rules, Sinkhorn, the
// rope tables per profile, and the activation rounding.
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { softmaxPool } from '../../src/kernels/index.ts'
import { presetConfig } from '../../src/model/checkpoint/index.ts'
import { activationRounding } from '../../src/model/engine/activation.ts'
import { CompressorState, LayerCache, ModelCache } from '../../src/model/engine/cache.ts'
import { compressTokens, type CompressorParams } from '../../src/model/engine/compressor.ts'
import { sinkhorn } from '../../src/model/engine/hyper-connections.ts'
import { weightedRmsNorm } from '../../src/model/engine/norms.ts'
import { RopeTables } from '../../src/model/engine/rope-tables.ts'
import { scratch } from '../../src/model/engine/scratch.ts'
import { ropeInvFreq, ropeTable } from '../../src/model/rope.ts'
import { f32ToBf16, roundBf16 } from '../../src/numerics/bf16.ts'
import { firstBitDifference } from './helpers.ts'

const tiny = presetConfig('tiny')
const f32 = activationRounding('f32')
const bf16 = activationRounding('bf16')

describe('LayerCache keeps the last window-1 K=V rows, oldest first, whatever the chunks', () => {
  it('after any sequence of chunk sizes, windowRows() is rows max(0, T-127) .. T-1 in order', () => {
    fc.assert(fc.property(fc.array(fc.integer({ min: 1, max: 150 }), { minLength: 1, maxLength: 8 }), (chunks) => {
      const d = 2
      const layer = new LayerCache('sliding_attention', d, 127, null, null)
      let t = 0
      for (const n of chunks) {
        const rows = new Float32Array(n * d)
        for (let i = 0; i < n; i++) rows[i * d] = rows[i * d + 1] = t + i
        layer.pushWindow(rows, n)
        t += n
      }
      const got = layer.windowRows()
      const first = Math.max(0, t - 127)
      expect(got.length).toBe((t - first) * d)
      for (let r = 0; r < t - first; r++) expect(got[r * d]).toBe(first + r)
    }), { seed: 7, numRuns: 200 })
  })
})

describe('ModelCache dumps transformers\' names and is a deep, independent copy when cloned', () => {
  it('an empty tiny cache has empty windows and pools, zero entry counts and no overlap carry yet', () => {
    const c = ModelCache.empty(tiny)
    const t = c.tensors('x')
    expect(t.get('x.layers.0.window')!.shape).toEqual([0, 128])
    expect(t.get('x.layers.1.compressor.compressed_kv')!.shape).toEqual([0, 128])
    expect(t.get('x.layers.1.indexer.buffer_kv')!.shape).toEqual([0, 256])
    expect(t.get('x.layers.2.compressor.buffer_gate')!.shape).toEqual([0, 128])
    expect(t.get('x.layers.3.indexer.entry_count')!.data).toEqual(BigInt64Array.of(0n))
    expect(t.has('x.layers.1.compressor.overlap_kv')).toBe(false)
    expect(t.has('x.layers.0.compressor.buffer_kv')).toBe(false)
    expect(t.has('x.layers.2.indexer.buffer_kv')).toBe(false)
  })

  it('changing a clone leaves the original as it was', () => {
    const c = ModelCache.empty(tiny)
    c.layers[0].pushWindow(new Float32Array(128).fill(1), 1)
    const copy = c.clone()
    copy.layers[0].pushWindow(new Float32Array(128).fill(2), 1)
    copy.tokenCount = 9
    expect(c.layers[0].windowLength).toBe(1)
    expect(c.tokenCount).toBe(0)
    expect(copy.layers[0].windowLength).toBe(2)
  })
})

// A compressor over random projections: ratio r, entry width d, overlap or not.
function feed (state: CompressorState, kv: Float32Array, gate: Float32Array, chunks: number[], p: CompressorParams): void {
  const w = state.width
  let t = 0
  for (const n of chunks) {
    compressTokens(state, kv.subarray(t * w, (t + n) * w), gate.subarray(t * w, (t + n) * w), n, p, f32)
    t += n
  }
}

function randomArray (n: number, seed: number): Float32Array {
  let s = seed
  return Float32Array.from({ length: n }, () => {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0
    return (s / 2 ** 32 - 0.5) * 4
  })
}

function params (ratio: number, width: number, dim: number): CompressorParams {
  const table = ropeTable(tiny.rope.compress, 512)
  return { positionBias: randomArray(ratio * width, 3), normWeight: new Float32Array(dim).fill(1), rmsEps: 1e-6, cos: table.cos, sin: table.sin, ropeDim: 64 }
}

describe('the compressor pools complete windows only, aligned to position 0', () => {
  it('ratio 4 with overlap, 23 tokens in chunks 5, 1, 9, 8: 5 entries, 3 buffered tokens (raw gates), carry = window 4\'s Ca half with bias', () => {
    const state = new CompressorState(4, 128, true)
    const kv = randomArray(23 * 256, 1)
    const gate = randomArray(23 * 256, 2)
    const p = params(4, 256, 128)
    feed(state, kv, gate, [5, 1, 9, 8], p)
    expect(state.entryCount).toBe(5)
    expect(state.bufferLength).toBe(3)
    expect(firstBitDifference(state.bufferGate.subarray(0, 3 * 256), gate.subarray(20 * 256, 23 * 256))).toBe(-1)
    for (let j = 0; j < 4; j++) {
      for (let c = 0; c < 128; c++) {
        expect(state.overlapKv![j * 128 + c]).toBe(kv[(16 + j) * 256 + c])
        expect(state.overlapGate![j * 128 + c]).toBe(Math.fround(gate[(16 + j) * 256 + c] + p.positionBias[j * 256 + c]))
      }
    }
  })

  it('the first overlapping window has no predecessor: its Ca slots weigh exactly 0', () => {
    const state = new CompressorState(4, 128, true)
    const kv = randomArray(4 * 256, 5)
    const gate = randomArray(4 * 256, 6)
    const p = { ...params(4, 256, 128), ropeDim: 2 }
    feed(state, kv, gate, [4], p)
    // The same entry from the Cb half alone: pool, norm (weight 1), rope at position 0 (the identity).
    const cbKv = new Float32Array(4 * 128)
    const cbGate = new Float32Array(4 * 128)
    for (let j = 0; j < 4; j++) {
      for (let c = 0; c < 128; c++) {
        cbKv[j * 128 + c] = kv[j * 256 + 128 + c]
        cbGate[j * 128 + c] = Math.fround(gate[j * 256 + 128 + c] + p.positionBias[j * 256 + 128 + c])
      }
    }
    const pooled = softmaxPool(cbKv, cbGate, 1, 4, 128)
    const entry = weightedRmsNorm(pooled, 1, 128, p.normWeight, 1e-6, f32)
    expect(firstBitDifference(state.entries.row(0), entry)).toBe(-1)
  })

  it('HCA (ratio 128, no overlap): 300 tokens give 2 entries and 44 buffered tokens, whatever the chunks', () => {
    const kv = randomArray(300 * 128, 7)
    const gate = randomArray(300 * 128, 8)
    const p = params(128, 128, 128)
    const a = new CompressorState(128, 128, false)
    feed(a, kv, gate, [300], p)
    const b = new CompressorState(128, 128, false)
    feed(b, kv, gate, [127, 1, 1, 126, 45], p)
    expect(a.entryCount).toBe(2)
    expect(a.bufferLength).toBe(44)
    expect(a.overlapKv).toBe(null)
    expect(firstBitDifference(a.entries.view(), b.entries.view())).toBe(-1)
    expect(firstBitDifference(a.bufferKv, b.bufferKv)).toBe(-1)
  })
})

describe('Sinkhorn as transformers writes it', () => {
  it('ends column-normalised: every column sums to 1 within 1e-5 (the + eps in each denominator is 1e-6, plus fp32 rounding of 4 terms)', () => {
    fc.assert(fc.property(fc.array(fc.float({ min: -4, max: 4, noNaN: true }), { minLength: 16, maxLength: 16 }), (logits) => {
      const c = Float32Array.from(logits)
      sinkhorn(c, 0, 4, 20, 1e-6)
      for (let k = 0; k < 4; k++) {
        const col = c[k] + c[4 + k] + c[8 + k] + c[12 + k]
        expect(Math.abs(col - 1)).toBeLessThan(1e-5)
      }
      for (const v of c) expect(v).toBeGreaterThan(0)
    }), { seed: 11, numRuns: 100 })
  })

  it('one iteration is softmax + eps then one column normalisation (a hand-checked case)', () => {
    const c = new Float32Array(4) // 2 x 2 zeros: softmax 0.5 each, + eps, columns sum to 1 + 2 eps
    sinkhorn(c, 0, 2, 1, 1e-6)
    const e = Math.fround(1e-6)
    const v = Math.fround(Math.fround(0.5) + e)
    const den = Math.fround(Math.fround(v + v) + e)
    for (const x of c) expect(x).toBe(Math.fround(v / den))
  })
})

describe('rope tables per profile', () => {
  it('f32: identical bits to src/model/rope.ts ropeTable for both kinds', () => {
    const tables = new RopeTables(tiny, { invFreqBf16: false, cosSinBf16: false })
    for (const kind of ['main', 'compress'] as const) {
      const t = tables.table(kind, 600)
      const ref = ropeTable(tiny.rope[kind], 600)
      expect(firstBitDifference(t.cos.subarray(0, ref.cos.length), ref.cos)).toBe(-1)
      expect(firstBitDifference(t.sin.subarray(0, ref.sin.length), ref.sin)).toBe(-1)
    }
  })

  it('hf-bf16: angles from bf16-rounded inv_freq (a buffer cast with the model), cos and sin rounded to bf16', () => {
    const t = new RopeTables(tiny, { invFreqBf16: true, cosSinBf16: true }).table('compress', 1000)
    const inv = ropeInvFreq(tiny.rope.compress)
    const half = inv.length
    for (const pos of [1, 77, 999]) {
      for (const k of [0, 5, 17, 31]) {
        const angle = Math.fround(pos * roundBf16(inv[k]))
        expect(t.cos[pos * half + k]).toBe(roundBf16(Math.fround(Math.cos(angle))))
        expect(t.sin[pos * half + k]).toBe(roundBf16(Math.fround(Math.sin(angle))))
      }
    }
    // And it is not the fp32-frequency table rounded afterwards.
    const plain = ropeTable(tiny.rope.compress, 1000)
    let differ = 0
    for (let i = 0; i < plain.cos.length; i++) if (roundBf16(plain.cos[i]) !== t.cos[i]) differ++
    expect(differ).toBeGreaterThan(1000)
  })
})

describe('activation rounding', () => {
  it('bf16 roundAll (a bit-level loop) equals f32ToBf16 for every bf16 prefix with 13 low halves, ties and NaNs included', () => {
    const lows = [0, 1, 2, 0x4000, 0x7ffe, 0x7fff, 0x8000, 0x8001, 0xc000, 0xfffe, 0xffff, 0x1234, 0xabcd]
    const bits = new Uint32Array(65536 * lows.length)
    let k = 0
    for (let hi = 0; hi < 65536; hi++) for (const lo of lows) bits[k++] = ((hi << 16) | lo) >>> 0
    const before = bits.slice()
    bf16.roundAll(new Float32Array(bits.buffer))
    let bad = 0
    const one = new Uint32Array(1)
    const oneF = new Float32Array(one.buffer)
    for (let i = 0; i < bits.length; i++) {
      one[0] = before[i]
      const isNan = (before[i] & 0x7f800000) === 0x7f800000 && (before[i] & 0x7fffff) !== 0
      const want = isNan ? ((before[i] & 0x80000000) | 0x7fc00000) >>> 0 : (f32ToBf16(oneF[0]) << 16) >>> 0
      if (bits[i] !== want) bad++
    }
    expect(bad).toBe(0)
  })


  it('f32 is the identity; bf16 rounds to nearest even and is idempotent', () => {
    const x = Float32Array.of(1 + 2 ** -8, 1 + 3 * 2 ** -8, -0.1)
    expect(firstBitDifference(f32.roundAll(x.slice()), x)).toBe(-1)
    const y = bf16.roundAll(x.slice())
    expect(Array.from(y)).toEqual([1, 1 + 2 ** -6, roundBf16(-0.1)])
    expect(firstBitDifference(bf16.roundAll(y.slice()), y)).toBe(-1)
  })
})

describe('scratch slots: one buffer per slot, reused, grown when a call needs more', () => {
  it('gives views of the asked length; a smaller ask reuses the buffer, a larger one replaces it; slots never share memory', () => {
    const a = scratch('components-test-a', 8)
    expect(a.length).toBe(8)
    a.fill(7)
    const again = scratch('components-test-a', 5)
    expect(again.length).toBe(5)
    expect(again.buffer).toBe(a.buffer)
    expect([...again]).toEqual([7, 7, 7, 7, 7])
    const b = scratch('components-test-b', 8)
    expect(b.buffer).not.toBe(a.buffer)
    const grown = scratch('components-test-a', 9)
    expect(grown.length).toBe(9)
    expect(grown.buffer).not.toBe(a.buffer)
    expect(scratch('components-test-a', 3).buffer).toBe(grown.buffer)
  })
})

// mx.quantize without MLX (src/numerics/mlx-cpu/quantize.ts) and the cache path's weights made from
// an ordinary checkpoint with it (src/capture/mlx-cpu/from-checkpoint.ts), against MLX 0.32.2 CPU:
// 1. the quantizer on LCG-generated bf16 weights against the digests of mx.quantize's own outputs
//    (harness/mlx/probes/probe_quantize.py prints them; it also checks the rules exhaustively over
//    every bf16 amax, and on normal weights at five scales, at 100 %);
// 2. the weights built from makeCheckpoint's tiny and flash-schedule checkpoints (seed 1, the ones
//    harness/mlx/make-fixtures.sh gave oMLX) against the weights MLX held after its own bf16 cast and
//    nn.quantize (harness/fixtures/mlx/*-mxq-cache-weights.safetensors): every array, every bit;
// 3. the mlx-cpu cache path on those built weights against MLX's one-shot caches (27/27 tiny,
//    312/312 flash schedule, as with MLX's own weights in capture-mlx-cpu.test.ts).
import { createHash } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { readMlxFixture } from '../../harness/mlx/mlx-fixture.ts'
import {
  mlxCpuCacheConfig, mlxCpuCacheWeightsFromCheckpoint, mlxCpuLayerCache, readMlxCpuCacheWeights,
  type MlxCompressorWeights, type MlxCpuCacheWeights,
} from '../../src/capture/mlx-cpu/index.ts'
import { readSafetensors, viewAs } from '../../src/formats/safetensors/index.ts'
import { checkpointDigest, loadCheckpoint, makeCheckpoint, presetConfig } from '../../src/model/checkpoint/index.ts'
import { f32ToBf16 } from '../../src/numerics/bf16.ts'
import {
  affineQuantize, MLX_E4M3_VALUES, mxfp8Quantize, packBytes, rint, toFp8,
} from '../../src/numerics/mlx-cpu/index.ts'
import type { AffineWeight, Mxfp8Weight } from '../../src/numerics/mlx-cpu/index.ts'
import { compareLayer, showComparisons, type ArrayComparison } from './capture-mlx-cpu-compare.ts'

const SLOW = 600_000

function sha256 (a: ArrayBufferView): string {
  return createHash('sha256').update(new Uint8Array(a.buffer, a.byteOffset, a.byteLength)).digest('hex')
}

function bf16Codes (a: Float32Array): Uint16Array {
  return Uint16Array.from(a, f32ToBf16)
}

/** probe_quantize.py's lcg_bf16: sign and 7 mantissa bits from a 32-bit LCG, exponent expLo + (r % span). */
function lcgBf16 (n: number, seed: number, expLo: number, span: number): Float32Array {
  const u = new Uint32Array(n)
  let s = seed >>> 0
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0
    const hi = s >>> 16
    u[i] = ((hi & 0x8000) | ((expLo + ((hi >>> 7) % span)) << 7) | (hi & 0x7f)) << 16
  }
  return new Float32Array(u.buffer)
}

describe('mx.quantize rules against the digests of MLX\'s own outputs (probe_quantize.py)', () => {
  it('rint rounds ties to even; ToFP8 inverts MLX\'s e4m3 decode on every non-NaN code', () => {
    expect([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4999, -3.5].map(rint)).toEqual([0, 2, 2, -0, -2, -2, 2, -4])
    let bad = 0
    for (let c = 0; c < 256; c++) if ((c & 0x7f) !== 0x7f && toFp8(MLX_E4M3_VALUES[c]) !== c) bad++
    expect(bad).toBe(0)
  })

  it('mxfp8 g32 on [64, 1024] LCG weights over the whole bf16 exponent range: words and scales', () => {
    const w = lcgBf16(64 * 1024, 7, 1, 254)
    const q = mxfp8Quantize(w, 64, 1024)
    expect(sha256(q.packed)).toBe('a1ef9fb8955a55ab550275f3cb2a26097160727cd1c93e70a40752180388e3f5')
    expect(sha256(q.scales)).toBe('141039ae55f4ccb33e8500a9015f2b37bbdfceb4675017e1180681400a5e6f3a')
  })

  it('affine 8-bit g64 on [64, 1024] LCG weights (exponents 2^-15 .. 2^0): words, scales, biases', () => {
    const w = lcgBf16(64 * 1024, 9, 112, 16)
    const q = affineQuantize(w, 64, 1024, 8, 64)
    expect(sha256(q.packed)).toBe('28a442a0e4a53a097b9defc361ba100f89d069d3faf07a885ba869ea8c0ef543')
    expect(sha256(bf16Codes(q.scales))).toBe('4e6560b11ccc528e45ca357463a320eaa2af7aeb227ebf40af7da6ebd9a8b95e')
    expect(sha256(bf16Codes(q.biases))).toBe('a55551ff92bdae0e37b11f37d86710131a40f980aafe3f3a31646776c8ec6c4d')
  })
})

/** One array compared element by element: bytes for codes, bf16 codes for values. */
interface ArrayMatch { name: string, elements: number, differ: number }

function sameBytes (name: string, ours: Uint8Array, ref: Uint8Array): ArrayMatch {
  if (ours.length !== ref.length) throw new Error(`${name}: ${ours.length} elements ours, ${ref.length} MLX's`)
  let differ = 0
  for (let i = 0; i < ours.length; i++) if (ours[i] !== ref[i]) differ++
  return { name, elements: ours.length, differ }
}

function sameWords (name: string, ours: Uint32Array, ref: Uint32Array): ArrayMatch {
  if (ours.length !== ref.length) throw new Error(`${name}: ${ours.length} words ours, ${ref.length} MLX's`)
  let differ = 0
  for (let i = 0; i < ours.length; i++) if (ours[i] !== ref[i]) differ++
  return { name, elements: ours.length, differ }
}

function sameBf16 (name: string, ours: Float32Array, ref: Uint16Array): ArrayMatch {
  if (ours.length !== ref.length) throw new Error(`${name}: ${ours.length} elements ours, ${ref.length} MLX's`)
  let differ = 0
  for (let i = 0; i < ours.length; i++) if (f32ToBf16(ours[i]) !== ref[i]) differ++
  return { name, elements: ours.length, differ }
}

/** Every array of the built weights against MLX's file, read raw (U32 words, U8 scales, BF16 values). */
async function compareWeights (ours: MlxCpuCacheWeights, file: string): Promise<ArrayMatch[]> {
  const { tensors } = await readSafetensors(file)
  const used = new Set<string>()
  const raw = (name: string) => {
    const t = tensors.get(name)
    if (t === undefined) throw new Error(`MLX's file has no ${name}`)
    used.add(name)
    return t
  }
  const out: ArrayMatch[] = []
  const quantizedCodes = (m: string, w: Mxfp8Weight | AffineWeight) => {
    const t = raw(`${m}.weight`)
    expect(t.shape).toEqual([w.n, w.k / 4])
    // The bytes the kernel reads, and the uint32 words MLX stores.
    out.push(sameBytes(`${m}.weight (codes)`, w.codes, t.data))
    out.push(sameWords(`${m}.weight (u32 words)`, packBytes(w.codes), viewAs(t, 'U32')))
  }
  const mx8 = (m: string, w: Mxfp8Weight) => {
    quantizedCodes(m, w)
    out.push(sameBytes(`${m}.scales`, w.scales, viewAs(raw(`${m}.scales`), 'U8')))
  }
  const aff = (m: string, w: AffineWeight) => {
    quantizedCodes(m, w)
    out.push(sameBf16(`${m}.scales`, w.scales, viewAs(raw(`${m}.scales`), 'BF16')))
    out.push(sameBf16(`${m}.biases`, w.biases, viewAs(raw(`${m}.biases`), 'BF16')))
  }
  const comp = (p: string, c: MlxCompressorWeights | null) => {
    if (c === null) {
      expect(tensors.has(`${p}.ape`), `${p}: MLX has a compressor, ours not`).toBe(false)
      return
    }
    aff(`${p}.wkv`, c.wkv)
    aff(`${p}.wgate`, c.wgate)
    out.push(sameBf16(`${p}.ape`, c.ape, viewAs(raw(`${p}.ape`), 'BF16')))
    out.push(sameBf16(`${p}.norm.weight`, c.norm, viewAs(raw(`${p}.norm.weight`), 'BF16')))
    expect([c.ratio, c.width]).toEqual(raw(`${p}.ape`).shape)
  }
  ours.layers.forEach((l, i) => {
    const p = `model.layers.${i}.attn`
    mx8(`${p}.wkv`, l.wkv)
    out.push(sameBf16(`${p}.kv_norm.weight`, l.kvNorm, viewAs(raw(`${p}.kv_norm.weight`), 'BF16')))
    comp(`${p}.compressor`, l.compressor)
    comp(`${p}.indexer.compressor`, l.indexerCompressor)
  })
  expect([...tensors.keys()].filter((n) => !used.has(n)), 'tensors of MLX\'s file not compared').toEqual([])
  return out
}

const dirs: string[] = []
afterAll(() => { for (const d of dirs) rmSync(d, { recursive: true, force: true }) })

const CASES = [
  { preset: 'tiny', fixture: 'tiny-t301-mxq', weights: 'tiny-mxq-cache-weights', arrays: 27, cachePath: true },
  // Its weights are compared array by array; the cache path on bit-identical weights is the same
  // computation suites/bitexact/seed-table runs on MLX's own (312/312), so it is not run twice.
  { preset: 'flash-schedule', fixture: 'flash-t301-mxq', weights: 'flash-mxq-cache-weights', arrays: 312, cachePath: false },
] as const

describe('cache-path weights built from the checkpoint against MLX\'s (bf16 cast + nn.quantize), then the cache path on them', () => {
  for (const k of CASES) {
    it(`${k.preset}: every weight array bit-identical${k.cachePath ? `; ${k.fixture} ${k.arrays}/${k.arrays} cache arrays bit-identical` : ''}`, async () => {
      const dir = mkdtempSync(join(tmpdir(), `pd-bridge-mlxq-${k.preset}-`))
      dirs.push(dir)
      await makeCheckpoint({ preset: k.preset, seed: 1, out: dir, force: true })
      const ckpt = await loadCheckpoint(dir)
      const file = new URL(`../../harness/fixtures/mlx/${k.weights}.safetensors`, import.meta.url).pathname
      const mlx = await readMlxCpuCacheWeights(file)
      expect(mlx.metadata.checkpoint_sha256, `${k.weights} was made from another checkpoint`).toBe(await checkpointDigest(dir))

      const t0 = performance.now()
      const ours = mlxCpuCacheWeightsFromCheckpoint(ckpt)
      const built = performance.now() - t0

      // The quantization table, module by module (the whole model's, not only the cache path's).
      expect(Object.fromEntries([...ours.modes].sort())).toEqual(Object.fromEntries([...mlx.modes].sort()))

      const ms = await compareWeights(ours, file)
      const elements = ms.reduce((a, m) => a + m.elements, 0)
      const differ = ms.reduce((a, m) => a + m.differ, 0)
      const kinds = new Map<string, { arrays: number, identical: number, elements: number, differ: number }>()
      for (const m of ms) {
        const kind = m.name.replace(/^model\.layers\.\d+\.attn\./, '')
        const e = kinds.get(kind) ?? { arrays: 0, identical: 0, elements: 0, differ: 0 }
        e.arrays++; e.elements += m.elements; e.differ += m.differ; if (m.differ === 0) e.identical++
        kinds.set(kind, e)
      }
      console.log(`${k.preset}: weights built from the checkpoint in ${built.toFixed(0)} ms vs MLX's ${k.weights} (${mlx.modes.size} quantized modules in the table, equal):\n` +
        [...kinds].map(([n, e]) => `  ${n.padEnd(42)} ${String(e.identical).padStart(3)}/${String(e.arrays).padEnd(3)} arrays identical, ${e.elements - e.differ}/${e.elements} elements`).join('\n') +
        `\n  all: ${ms.filter((m) => m.differ === 0).length}/${ms.length} arrays, ${elements - differ}/${elements} elements bit-identical`)
      expect(ms.filter((m) => m.differ !== 0).map((m) => `${m.name}: ${m.differ}/${m.elements}`)).toEqual([])

      if (!k.cachePath) return
      // The cache path on the built weights against MLX's one-shot caches.
      const fx = await readMlxFixture(k.fixture)
      expect(fx.metadata.checkpoint_sha256).toBe(mlx.metadata.checkpoint_sha256)
      const cfg = mlxCpuCacheConfig(presetConfig(k.preset))
      const cs: ArrayComparison[] = []
      for (let l = 0; l < ours.layers.length; l++) {
        cs.push(...compareLayer(fx, mlxCpuLayerCache(ours, cfg, l, fx.f32(`oneshot.layers.${l}.attn_input`), fx.ids.length)))
      }
      console.log(`${k.fixture}, mlx-cpu cache path on checkpoint-built weights vs MLX:\n${showComparisons(cs)}\n` +
        `  arrays bit-identical: ${cs.filter((c) => c.bitIdentical).length}/${cs.length}`)
      expect(cs.length).toBe(k.arrays)
      expect(cs.filter((c) => !c.bitIdentical).map((c) => c.name)).toEqual([])
    }, SLOW)
  }
})

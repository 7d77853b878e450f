// The mlx-cpu cache path (src/capture/mlx-cpu) against oMLX's own DeepSeek-V4 model on MLX 0.32.2's
// CPU backend, bit for bit. The fixtures (harness/fixtures/mlx, harness/mlx/make-fixtures.sh) hold
// each layer's attention input of a one-shot prefill and the caches MLX left after it; the weights
// file holds the cache path's weights as MLX held them (mxfp8 wkv, affine-8 compressors). Each
// layer's MLX attention input goes through our path and every stored array is compared: the
// window, and each PoolingCache's buf_kv, buf_gate, pooled, prev_win_kv, prev_win_gate (parts MLX
// holds as None are checked to be absent on our side too, and not counted). No MLX needed here.
//
// Result: every array bit-identical on both fixtures (27/27 tiny, 312/312 V4-Flash schedule), so
// the assertions are exact. The one rule known not to hold in general, powf (glibc's is not
// correctly rounded; ours rounds a double pow: 99.93 % on random exponents), is pinned here by the
// digest of MLX's own freqs for the exponents the model uses (harness/mlx/probes/probe_cache_path.py).
import { createHash } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { compressorPool, compressorProject, mlxCpuLayerCache, type MlxCpuLayerCache } from '../../src/capture/mlx-cpu/index.ts'
import { roundBf16 } from '../../src/numerics/bf16.ts'
import { bf16, deepseekV4RopeFreqs, fma32, mlxCos, mlxExp, mlxSin, MLX_CPU, type RoundingPoints } from '../../src/numerics/mlx-cpu/index.ts'
import { compareLayer, layerCache, loadCase, runAll, showComparisons, tableLine } from './capture-mlx-cpu-compare.ts'

const SLOW = 300_000

function sha256 (a: Float32Array): string {
  return createHash('sha256').update(new Uint8Array(a.buffer, a.byteOffset, a.byteLength)).digest('hex')
}

describe('mlx-cpu numerics against digests of MLX\'s own outputs (probe_cache_path.py)', () => {
  it('bf16 rounding: the hot-loop helper equals src/numerics/bf16.ts on 200,000 float32 values', () => {
    let s = 12345
    let differ = 0
    const u = new Uint32Array(1)
    const f = new Float32Array(u.buffer)
    for (let i = 0; i < 200_000; i++) {
      s = (Math.imul(s, 1103515245) + 12345) >>> 0
      u[0] = s
      if (!Number.isNaN(f[0]) && !Object.is(bf16(f[0]), roundBf16(f[0]))) differ++
    }
    expect(differ).toBe(0)
  })

  it('fma32 rounds once, where a double fma rounded to float32 lands on a midpoint and rounds twice', () => {
    const a = 1 + 2 ** -12
    // a·a = 1 + 2^-11 + 2^-24 exactly (a float32 midpoint); + 2^-60 puts the exact value above it.
    expect(Math.fround(a * a + 2 ** -60)).toBe(1 + 2 ** -11)
    expect(fma32(a, a, 2 ** -60)).toBe(1 + 2 ** -11 + 2 ** -23)
    expect(fma32(a, a, -(2 ** -60))).toBe(1 + 2 ** -11)
    expect(fma32(a, -a, 2 ** -60)).toBe(-(1 + 2 ** -11))
  })

  it('Cephes exp, sin, cos: the digests of mx.exp / mx.sin / mx.cos on 100,001 inputs', () => {
    const n = 100_001
    const xe = new Float32Array(n)
    const xs = new Float32Array(n)
    for (let i = 0; i < n; i++) { xe[i] = (i - 50000) * 0.0019; xs[i] = (i - 50000) * 0.013 }
    expect(sha256(xe.map(mlxExp))).toBe('d0f990bfbc82c43f828ade6676f88fac8f5a01d7530911ac4ef8cb96464ad48f')
    expect(sha256(xs.map(mlxSin))).toBe('dd11c8d0df2247879ab714d6fe3a6e5f99ee9ca2a26a03b3f1b8bcd7642ee374')
    expect(sha256(xs.map(mlxCos))).toBe('060ea435a5f12a7a6de7f93fbf08c18d893840c6407c22acd69c31c21426f77f')
  })

  it('DeepseekV4RoPE freqs (pow, YaRN blend, 1/inv, /ratio, inf pairs): the digests of MLX\'s arrays', () => {
    const yarn = { factor: 32, originalMaxPositionEmbeddings: 1024, betaFast: 32, betaSlow: 1 }
    expect(sha256(deepseekV4RopeFreqs(64, 10000, null, 1, 128))).toBe('40163b8d580ae450d4459fee44116f977ac9d9ddb2d1369374502eaddb5ecaf5')
    expect(sha256(deepseekV4RopeFreqs(64, 160000, yarn, 1, 128))).toBe('dcf6a7362dd02572a74da4ca04871b78ad4ea533f40e298c4670d51e8b23ce5a')
    expect(sha256(deepseekV4RopeFreqs(64, 160000, yarn, 4, 128))).toBe('0a461654f56500936f3745a2c8a4236bdf30c2f6d6baacd06ba68c58b6962ee3')
    expect(sha256(deepseekV4RopeFreqs(64, 160000, yarn, 128, 128))).toBe('1f816adae6a3caf51212829de8c6daeb15f9849a045b49fc1641c42920c415d5')
  })
})

// The 43-layer V4-Flash schedule (312/312) is the seed's table, printed by suites/bitexact/seed-table.
const CASES = [
  { fixture: 'tiny-t301-mxq', weights: 'tiny-mxq-cache-weights', preset: 'tiny', arrays: 27 },
]

describe('mlx-cpu cache path against oMLX on MLX\'s CPU: every array of every layer bit-identical', () => {
  for (const k of CASES) {
    it(`${k.fixture}: ${k.arrays} arrays`, async () => {
      const c = await loadCase(k.fixture, k.weights, k.preset)
      const cs = runAll(c)
      console.log(`${k.fixture} (MLX ${c.fx.metadata.mlx_version} CPU, ${c.cfg.compressRatios.length} layers, T = ${c.T}), mlx-cpu cache path vs MLX:\n${showComparisons(cs)}\n  ${tableLine(cs)}`)
      expect(cs.length).toBe(k.arrays)
      expect(cs.filter((x) => !x.bitIdentical).map((x) => x.name)).toEqual([])
    }, SLOW)
  }
})

// The planted error: the ratio-4 overlap's lane A (channels [0, dim) of the projected kv, which
// window w borrows from window w-1) shifted by one channel, in a copy of our output. The stored
// previous window (prev_win_kv), the buffered remainder row (buf_kv) and the pooled entries
// computed from the shifted rows must then fail the comparison, and nothing else.
function shiftLaneA (rows: Float32Array, width: number, dim: number): Float32Array {
  const out = rows.slice()
  for (let o = 0; o < rows.length; o += width) {
    for (let c = 0; c < dim; c++) out[o + c] = rows[o + ((c + 1) % dim)]
  }
  return out
}

describe('a one-channel shift of the ratio-4 overlap\'s lane A fails the comparison', () => {
  it('tiny-t301-mxq layer 1 (CSA): pooled, prev_win_kv and buf_kv no longer match MLX', async () => {
    const c = await loadCase('tiny-t301-mxq', 'tiny-mxq-cache-weights', 'tiny')
    const layer = 1
    const ours = layerCache(c, layer)
    const cw = c.weights.layers[layer].compressor!
    expect(cw.ratio).toBe(4)
    const clean = compareLayer(c.fx, ours)
    expect(clean.every((x) => x.bitIdentical)).toBe(true)
    const proj = compressorProject(cw, c.fx.f32(`oneshot.layers.${layer}.attn_input`), c.T, c.cfg)
    const shifted = compressorPool(cw, c.cfg, { kv: shiftLaneA(proj.kv, cw.width, cw.dim), gate: proj.gate }, c.T)
    const mutated: MlxCpuLayerCache = { ...ours, pools: [shifted, ...ours.pools.slice(1)] }
    const cs = compareLayer(c.fx, mutated)
    console.log(`lane A shifted by one channel (layer ${layer} compressor):\n${showComparisons(cs)}\n  ${tableLine(cs)}`)
    const failing = cs.filter((x) => !x.bitIdentical).map((x) => x.name)
    // The remainder row in the buffer is raw kv too, so it carries the shift as well.
    expect(failing).toEqual(['buf_kv', 'pooled', 'prev_win_kv'].map((p) => `oneshot.layers.${layer}.pool0.${p}`))
  }, SLOW)
})

describe('the rounding points are data: the kernels round where the entry says', () => {
  it('MLX_CPU reproduces MLX; one rule changed to float32 (each in turn) leaves the arrays it governs no longer MLX\'s', async () => {
    const c = await loadCase('tiny-t301-mxq', 'tiny-mxq-cache-weights', 'tiny')
    expect(c.cfg.rounding).toBe(MLX_CPU)
    const layer = 1
    const clean = compareLayer(c.fx, layerCache(c, layer))
    expect(clean.every((x) => x.bitIdentical)).toBe(true)
    const variants: Array<[string, RoundingPoints]> = [
      ['rope.product', { ...MLX_CPU, rope: { ...MLX_CPU.rope, product: 'f32' } }],
      ['rmsNorm.weighted', { ...MLX_CPU, rmsNorm: { ...MLX_CPU.rmsNorm, weighted: 'f32' } }],
      ['quantizedMatmul.sum', { ...MLX_CPU, quantizedMatmul: { ...MLX_CPU.quantizedMatmul, sum: 'f32' } }],
      ['pooling.sum', { ...MLX_CPU, pooling: { ...MLX_CPU.pooling, sum: 'f32' } }],
    ]
    for (const [rule, points] of variants) {
      const cfg = { ...c.cfg, rounding: points }
      const ours = mlxCpuLayerCache(c.weights, cfg, layer, c.fx.f32(`oneshot.layers.${layer}.attn_input`), c.T)
      const cs = compareLayer(c.fx, ours)
      const failing = cs.filter((x) => !x.bitIdentical).map((x) => x.name)
      console.log(`${rule} as float32: ${failing.length}/${cs.length} arrays of layer ${layer} differ from MLX`)
      expect(failing.length, rule).toBeGreaterThan(0)
    }
  }, SLOW)
})


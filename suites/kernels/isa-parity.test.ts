// The kernel ISAs of native/ (docs/kernels.md, "Portable build and ISA dispatch") give the same
// bits: every entry point of the addon runs on the same seeded inputs (special values included:
// NaN of both signs, +-Inf, subnormals, -0, extremes, bf16 ties) in one child process per ISA
// (PD_KERNELS_ISA=avx512, avx2, portable: those this CPU runs); the SHA-256 of every output buffer
// and a few elements of each must agree with portable's. Also: the ISA the addon reports, the
// refusal of an unknown (or, on this CPU, an unusable) ISA, and that the ISA-compiled objects share
// no weak symbol (an AVX2-compiled inline function must never stand in for the portable one).
import { execFileSync, spawnSync } from 'node:child_process'
import { existsSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { DEFAULT_ADDON_PATH, loadNativeKernels } from '../../src/kernels/native.ts'

/** The raw addon's ISA exports (native/src/addon.cc). */
interface IsaExports { isa: string, isas: string[] }

// The child: plain JavaScript run by `node -e`, the addon path in PDB_ISA_ADDON.
const CHILD = String.raw`
const { createHash } = require('node:crypto')
const k = require(process.env.PDB_ISA_ADDON)
let seed = 0x9e3779b9
function rnd () {
  seed = (seed + 0x6d2b79f5) >>> 0
  let t = seed
  t = Math.imul(t ^ (t >>> 15), t | 1)
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}
const SPECIAL_BITS = [0x7fc00000, 0xffc00000, 0x7f800001, 0xff812345, 0x7f800000, 0xff800000, 0x00000000, 0x80000000,
  0x00000001, 0x80000001, 0x00400000, 0x807fffff, 0x007fffff, 0x00800000, 0x7f7fffff, 0xff7fffff, 0x3f808000,
  0x3f818000, 0x7149f2ca, 0xf149f2ca, 0x3f800000, 0xbf800000]
// n values: uniform in [-scale, scale), and every (every)-th one a special bit pattern; with rowLen,
// only in every third row of that length (so NaN and Inf do not reach every output).
function data (n, scale = 1, every = 9, rowLen = 0) {
  const a = new Float32Array(n)
  const u = new Uint32Array(a.buffer)
  for (let i = 0; i < n; i++) {
    if (every > 0 && i % every === every - 1 && (rowLen === 0 || Math.floor(i / rowLen) % 3 === 0)) u[i] = SPECIAL_BITS[Math.floor(rnd() * SPECIAL_BITS.length)] >>> 0
    else a[i] = (rnd() * 2 - 1) * scale
  }
  return a
}
// Random bit patterns over every exponent (NaN and Inf patterns included).
function bitsData (n) {
  const a = new Float32Array(n)
  const u = new Uint32Array(a.buffer)
  for (let i = 0; i < n; i++) u[i] = Math.floor(rnd() * 4294967296) >>> 0
  return a
}
const ints = (n, max) => Int32Array.from({ length: n }, () => Math.floor(rnd() * max))
const results = {}
function record (name, out) {
  const bytes = Buffer.from(out.buffer, out.byteOffset, out.byteLength)
  const u = new Uint32Array(out.buffer, out.byteOffset, out.length)
  const at = [...new Set([0, 1, 7, 8, 9, Math.floor(u.length / 2), u.length - 1])].filter((i) => i >= 0 && i < u.length)
  let nan = 0, canonical = 0, finite = 0
  for (let i = 0; i < u.length; i++) {
    const b = u[i]
    if ((b & 0x7fffffff) > 0x7f800000) { nan++; if (b === 0x7fc00000) canonical++ } else if ((b & 0x7f800000) !== 0x7f800000) finite++
  }
  results[name] = { sha256: createHash('sha256').update(bytes).digest('hex'), length: u.length, nan, canonical, finite,
    elements: at.map((i) => [i, u[i].toString(16).padStart(8, '0')]) }
}
for (const threads of [1, 2]) {
  k.setThreads(threads)
  const t = 't' + threads
  // matmul, both weight formats, every order (0 lanes8, 1 blocks128, 2 lanes8-fma, 3 sequential-fma), with and without
  // bf16 output. m >= 8 with k >= 64 takes avx512's 512-bit tiles: odd m, a k % 8 tail, n off the
  // 6-row tile and the 8-column thread grain, and k over two 512-long copies.
  for (const [m, kk, n, every] of [[5, 300, 19, 11], [1, 9, 7, 0], [2, 131, 9, 5], [64, 512, 64, 0], [9, 203, 23, 13], [17, 1100, 37, 0]]) {
    const x = data(m * kk, 2, every, kk)
    const w = data(n * kk, 1, every, kk)
    // bf16 codes: the top halves of such values, and in every third row random codes (NaN, Inf, subnormal).
    const codes = Uint16Array.from(new Uint32Array(data(n * kk, 1, every, kk).buffer), (b, i) =>
      every > 0 && Math.floor(i / kk) % 3 === 1 && i % 17 === 0 ? Math.floor(rnd() * 65536) : b >>> 16)
    for (const [order, orderName] of [[0, 'lanes8'], [1, 'blocks128'], [2, 'lanes8-fma'], [3, 'sequential-fma']]) {
      for (const bf of [false, true]) {
        const tag = t + '.' + m + 'x' + kk + 'x' + n + '.' + orderName + (bf ? '.bf16out' : '')
        record('matmulF32.' + tag, k.matmulF32(x, m, kk, w, n, new Float32Array(m * n), bf, order))
        record('matmulBf16.' + tag, k.matmulBf16(x, m, kk, codes, n, new Float32Array(m * n), bf, order))
      }
    }
    // Order 4: the same sequential-fma order over W packed in strips of 16 rows.
    const rows16 = Math.ceil(n / 16) * 16
    const packed = k.packStripsF32(w, n, kk, new Float32Array(rows16 * kk))
    const packedCodes = k.packStripsBf16(codes, n, kk, new Uint16Array(rows16 * kk))
    for (const bf of [false, true]) {
      const tag = t + '.' + m + 'x' + kk + 'x' + n + '.sequential-fma-packed' + (bf ? '.bf16out' : '')
      record('matmulF32.' + tag, k.matmulF32(x, m, kk, packed, n, new Float32Array(m * n), bf, 4))
      record('matmulBf16.' + tag, k.matmulBf16(x, m, kk, packedCodes, n, new Float32Array(m * n), bf, 4))
    }
  }
  // The grouped matmul (groups of 0, 1, 5 and 9 rows: the dot tiles, the decode tile, an empty group)
  // and the MoE experts stage on it (3 picks a token, specials in x, both activation roundings).
  for (const order of [0, 2, 3]) {
    const kk = 203, n = 37
    const rowsOf = [5, 0, 1, 9]
    const xs = rowsOf.map((m) => data(m * kk, 2, 11, kk))
    const ws = rowsOf.map(() => Uint16Array.from(new Uint32Array(data(n * kk, 1, 0).buffer), (b) => b >>> 16))
    const outs = k.matmulBf16Grouped(xs, rowsOf, kk, ws, n, rowsOf.map((m) => new Float32Array(m * n)), false, order)
    outs.forEach((o, g) => record('matmulBf16Grouped.' + t + '.o' + order + '.g' + g, o))
    const experts = 5, hidden = 48, inter = 24, nTok = 7, topk = 3
    const gateUps = Array.from({ length: experts }, () => Uint16Array.from(new Uint32Array(data(2 * inter * hidden, 0.3, 0).buffer), (b) => b >>> 16))
    const downs = Array.from({ length: experts }, () => Uint16Array.from(new Uint32Array(data(hidden * inter, 0.3, 0).buffer), (b) => b >>> 16))
    const picks = new Int32Array(nTok * topk)
    for (let tok = 0; tok < nTok; tok++) for (let j = 0; j < topk; j++) picks[tok * topk + j] = (tok + 2 * j) % experts
    for (const bf of [false, true]) {
      record('moeExperts.' + t + '.o' + order + (bf ? '.bf16' : '.f32'), k.moeExperts(data(nTok * hidden, 3, 13, hidden), nTok, hidden, inter, gateUps, downs, picks,
        data(nTok * topk, 1, 0), topk, 0.8, bf, order, new Float32Array(nTok * hidden)))
    }
  }
  // RMSNorm: a zero row (NaN with eps 0), a huge row (sum overflows), subnormal rows.
  for (const [rows, d, eps] of [[7, 333, 1e-6], [3, 8, 0], [2, 1, 1e-5]]) {
    const x = data(rows * d, 3, 13, d)
    for (let i = 0; i < d; i++) x[i] = 0
    if (rows > 1) for (let i = 0; i < d; i++) x[d + i] = (i % 2 ? -1 : 1) * 3e38
    if (rows > 2) for (let i = 0; i < d; i++) x[2 * d + i] = (i + 1) * 1e-42
    record('rmsNorm.' + t + '.' + rows + 'x' + d + '.eps' + eps, k.rmsNorm(x, rows, d, data(d, 2, 7), eps, new Float32Array(rows * d)))
  }
  // fmath: random bit patterns, the busy range, and exact edges, lengths around the 8-lane body.
  const edges = Float32Array.from([0, -0, Infinity, -Infinity, NaN, 88.72283, 88.72284, -104, -103.99999, -120, -87.33655,
    -64, -64.00001, 20, 20.000002, -20, -80, 80, 1, -1, -0.99999994, 5.9604645e-8, -5.9604645e-8, 1e-45, -1e-45])
  for (const [label, x] of [['bits', bitsData(4099)], ['busy', data(4099, 100, 0)], ['edges', edges]]) {
    for (let code = 0; code < 7; code++) record('fmathArray.' + t + '.' + code + '.' + label, k.fmathArray(code, x, new Float32Array(x.length)))
  }
  // attention: D = 70 (a 32-wide group, an 8-wide group and a tail), repeated keys, every flag set.
  for (const [T, H, D, N, every] of [[5, 3, 70, 50, 0], [4, 2, 45, 20, 17], [1, 4, 8, 3, 0]]) {
    const q = data(T * H * D, 1, every, D)
    const kv = data(N * D, 1, every, D)
    const offsets = new Int32Array(T + 1)
    for (let i = 0; i < T; i++) offsets[i + 1] = offsets[i] + 1 + Math.floor(rnd() * 40)
    const keys = ints(offsets[T], N)
    // With specials: odd queries avoid the kv rows that hold them (every third), so not every output is NaN.
    if (every) for (let i = 0; i < T; i += 2) for (let j = offsets[i + 1]; j < offsets[i + 2]; j++) if (keys[j] % 3 === 0) keys[j] += 1
    const sinks = data(H, 2, every ? 3 : 0)
    for (let flags = 0; flags < 8; flags++) {
      record('attentionMqa.' + t + '.' + [T, H, D, N].join('x') + '.f' + flags + (every ? '.special' : ''),
        k.attentionMqa(q, T, H, D, kv, N, offsets, keys, sinks, 0.125, flags, new Float32Array(T * H * D)))
    }
  }
  // indexer: T not a multiple of 8, visible counts off the 8-entry grid.
  for (const [T, Hi, Di, N, every] of [[11, 4, 33, 77, 0], [9, 3, 16, 20, 7]]) {
    const visible = ints(T, N + 1)
    record('indexerScores.' + t + '.' + [T, Hi, Di, N].join('x') + (every ? '.special' : ''),
      k.indexerScores(data(T * Hi * Di, 1, every, Di), T, Hi, Di, data(N * Di, 1, every, Di), N, data(T * Hi, 1, every, Hi), visible, 0.5, 0.25,
        new Float32Array(T * N)))
  }
  // pooling: d = 83 (channel blocks of 64, 8-lane groups and a tail), every flag set, -Inf gates.
  for (const [W, rows, d, every] of [[3, 5, 83, 0], [2, 4, 17, 6]]) {
    const gate = data(W * rows * d, 4, every, d)
    for (let i = 0; i < gate.length; i += 23) gate[i] = -Infinity
    const kv = data(W * rows * d, 1, every, d)
    for (let flags = 0; flags < 8; flags++) {
      record('softmaxPool.' + t + '.' + [W, rows, d].join('x') + '.f' + flags + (every ? '.special' : ''),
        k.softmaxPool(kv, gate, W, rows, d, flags, new Float32Array(W * d)))
    }
  }
  // RoPE rows: half = 17 (four 4-pair groups and a tail), both directions, specials in x and the table.
  for (const inverse of [false, true]) {
    const rows = 6, heads = 2, headDim = 40, offset = 4, ropeDim = 34, tableRows = 9
    const x = data(rows * heads * headDim, 3, 10)
    const cos = data(tableRows * ropeDim / 2, 1, 15)
    const sin = data(tableRows * ropeDim / 2, 1, 15)
    record('ropeRows.' + t + (inverse ? '.inverse' : '.forward'),
      k.ropeRows(x, rows, heads, headDim, offset, ropeDim, cos, sin, ints(rows, tableRows), inverse))
  }
  // bf16 activation rounding: random bit patterns (NaNs of both signs) and ties.
  const r = bitsData(4099)
  const ru = new Uint32Array(r.buffer)
  for (let i = 5; i < ru.length; i += 8) ru[i] = ((ru[i] & 0xffff0000) | 0x8000) >>> 0
  record('roundBf16Array.' + t, k.roundBf16Array(r))
  // hyper-connection write-back (scalar only: the same object code on both paths).
  for (const bf of [false, true]) {
    const n = 3, hc = 4, hidden = 37
    record('hcPost.' + t + (bf ? '.bf16' : '.f32'), k.hcPost(data(n * hc * hidden, 2, 11), n, data(n * hc, 1, 0), data(n * hc * hc, 1, 0),
      data(n * hidden, 2, 11), hc, hidden, bf, new Float32Array(n * hc * hidden)))
  }
}
process.stdout.write(JSON.stringify({ isa: k.isa, isas: k.isas, results }))
`

interface CaseResult { sha256: string, length: number, nan: number, canonical: number, finite: number, elements: Array<[number, string]> }
interface ChildOutput { isa: string, isas: string[], results: Record<string, CaseResult> }

function runChild (isa: string | undefined, extra: NodeJS.ProcessEnv = {}): ChildOutput {
  const env: NodeJS.ProcessEnv = { ...process.env, PDB_ISA_ADDON: DEFAULT_ADDON_PATH, ...extra }
  if (isa === undefined) delete env.PD_KERNELS_ISA
  else env.PD_KERNELS_ISA = isa
  const text = execFileSync(process.execPath, ['-e', CHILD], { env, encoding: 'utf8', maxBuffer: 64 << 20 })
  return JSON.parse(text) as ChildOutput
}

function loadIn (isa: string): { status: number | null, stdout: string, stderr: string } {
  const code = 'const k = require(process.env.PDB_ISA_ADDON); process.stdout.write(k.isa)'
  const r = spawnSync(process.execPath, ['-e', code], { env: { ...process.env, PDB_ISA_ADDON: DEFAULT_ADDON_PATH, PD_KERNELS_ISA: isa }, encoding: 'utf8' })
  return { status: r.status, stdout: r.stdout, stderr: r.stderr }
}

/** The ISAs this CPU and build can run (the addon's `isas`), from a child loaded with portable. */
const usable = (JSON.parse(execFileSync(process.execPath, ['-e', 'process.stdout.write(JSON.stringify(require(process.env.PDB_ISA_ADDON).isas))'],
  { env: { ...process.env, PDB_ISA_ADDON: DEFAULT_ADDON_PATH, PD_KERNELS_ISA: 'portable' }, encoding: 'utf8' })) as IsaExports['isas'])

describe('kernel ISA dispatch', () => {
  it('reports the ISA it runs: PD_KERNELS_ISA forces one, unset picks the widest the CPU runs', () => {
    expect(usable).toContain('portable')
    expect(usable.at(-1)).toBe('portable')
    // The widest first: avx512 needs everything avx2 needs.
    if (usable.includes('avx512')) expect(usable).toContain('avx2')
    for (const isa of usable) expect(loadIn(isa)).toMatchObject({ status: 0, stdout: isa })
    const auto = loadIn('')
    expect(auto.status).toBe(0)
    expect(auto.stdout).toBe(usable[0])
  })

  it('this process (and so every kernel suite run with it) uses the ISA PD_KERNELS_ISA asks for', () => {
    const k = loadNativeKernels() as unknown as IsaExports
    const want = process.env.PD_KERNELS_ISA
    expect(k.isa).toBe(want !== undefined && want !== '' ? want : usable[0])
    expect(k.isas).toEqual(usable)
    console.log(`isa-parity: the kernel suites in this run use the ${k.isa} kernels (PD_KERNELS_ISA=${want ?? ''})`)
  })

  it('refuses an unknown ISA, and avx512 or avx2 where it cannot run, with a clear error at load', () => {
    const bad = loadIn('sse9')
    expect(bad.status).not.toBe(0)
    expect(bad.stderr).toContain('PD_KERNELS_ISA=sse9 is not a kernel ISA (expected avx512, avx2 or portable, or unset)')
    if (!usable.includes('avx2')) {
      const avx2 = loadIn('avx2')
      expect(avx2.status).not.toBe(0)
      expect(avx2.stderr).toMatch(/PD_KERNELS_ISA=avx2, but this (CPU lacks AVX2, F16C or FMA|build has no AVX2 kernels)/)
    }
    if (!usable.includes('avx512')) {
      const avx512 = loadIn('avx512')
      expect(avx512.status).not.toBe(0)
      expect(avx512.stderr).toMatch(/PD_KERNELS_ISA=avx512, but this (CPU lacks AVX-512|build has no AVX-512 kernels)/)
    }
  })

  // Chunks on the persistent workers or on threads started per call (native/src/thread_pool.h): the
  // split is the same, so every output buffer must be too, on the widest ISA and on portable.
  it.each([usable[0], 'portable'])('%s: the worker pool (PD_KERNEL_POOL=on) and threads per call (off) give byte-identical outputs', (isa) => {
    const on = runChild(isa, { PD_KERNEL_POOL: 'on' })
    const off = runChild(isa, { PD_KERNEL_POOL: 'off' })
    expect(Object.keys(on.results).length).toBeGreaterThan(100)
    expect(on.results).toEqual(off.results)
    const pool = (mode: string): string => execFileSync(process.execPath, ['-e', 'process.stdout.write(String(require(process.env.PDB_ISA_ADDON).threadPool))'],
      { env: { ...process.env, PDB_ISA_ADDON: DEFAULT_ADDON_PATH, PD_KERNEL_POOL: mode }, encoding: 'utf8' })
    expect([pool('on'), pool('off')]).toEqual(['true', 'false'])
  })

  const vectorIsas = usable.filter((isa) => isa !== 'portable')
  it.skipIf(vectorIsas.length === 0).each(vectorIsas)('%s and portable give byte-identical outputs on every entry point', (isa) => {
    const a = runChild(isa)
    const p = runChild('portable')
    expect(a.isa).toBe(isa)
    expect(p.isa).toBe('portable')
    const names = Object.keys(a.results)
    expect(Object.keys(p.results)).toEqual(names)
    const kernels = new Map<string, { cases: number, elements: number, nan: number }>()
    const differ: string[] = []
    for (const name of names) {
      const ra = a.results[name]
      const rp = p.results[name]
      if (ra.sha256 !== rp.sha256) differ.push(name)
      expect(rp.elements, name).toEqual(ra.elements)
      expect(rp.nan, name).toBe(ra.nan)
      const kernel = name.split('.')[0]
      // Kernels write only the canonical NaN (roundBf16Array keeps the sign of a NaN input, and
      // ropeRows leaves the slots outside the rope dims as they were).
      if (kernel !== 'roundBf16Array' && kernel !== 'ropeRows') expect(ra.canonical, name).toBe(ra.nan)
      const s = kernels.get(kernel) ?? { cases: 0, elements: 0, nan: 0 }
      kernels.set(kernel, { cases: s.cases + 1, elements: s.elements + ra.length, nan: s.nan + ra.nan })
    }
    expect(differ).toEqual([])
    // The inputs really reach special cases and real values.
    expect(a.results['fmathArray.t1.0.edges'].finite).toBeGreaterThan(10)
    expect(a.results['matmulF32.t1.5x300x19.lanes8'].nan).toBeGreaterThan(0)
    expect(a.results['matmulF32.t1.1x9x7.lanes8'].nan).toBe(0)
    expect(a.results['matmulF32.t2.9x203x23.lanes8-fma'].nan).toBeGreaterThan(0)
    expect(a.results['matmulF32.t2.17x1100x37.lanes8-fma'].finite).toBe(17 * 37)
    expect(a.results['matmulF32.t2.9x203x23.sequential-fma'].nan).toBeGreaterThan(0)
    expect(a.results['matmulF32.t2.17x1100x37.sequential-fma'].finite).toBe(17 * 37)
    // Packed once or per call, the same order gives the same bits.
    expect(a.results['matmulBf16.t2.9x203x23.sequential-fma-packed'].sha256).toBe(a.results['matmulBf16.t2.9x203x23.sequential-fma'].sha256)
    expect(a.results['matmulF32.t1.1x9x7.sequential-fma-packed.bf16out'].sha256).toBe(a.results['matmulF32.t1.1x9x7.sequential-fma.bf16out'].sha256)
    const rows = [...kernels].map(([kernel, s]) => `  ${kernel.padEnd(15)} ${String(s.cases).padStart(3)} cases ${String(s.elements).padStart(8)} elements (${s.nan} NaN)  identical`)
    console.log(`isa-parity: ${isa} vs portable, ${names.length} output buffers, SHA-256 equal on all\n${rows.join('\n')}`)
  })

  it('the run is deterministic: the same ISA twice gives the same hashes', () => {
    const p1 = runChild('portable')
    const p2 = runChild('portable')
    for (const name of Object.keys(p1.results)) expect(p2.results[name].sha256, name).toBe(p1.results[name].sha256)
  })

  // The ISA-compiled objects (native/build) define no global or weak symbol outside their own
  // namespace, so the linker cannot merge an AVX2-compiled copy into the portable path.
  const objRoot = join(DEFAULT_ADDON_PATH, '..', 'obj.target')
  const hasNm = spawnSync('nm', ['--version']).status === 0
  it.skipIf(!hasNm || !existsSync(join(objRoot, 'pdb_kernels_portable')))('ISA objects share no symbols', () => {
    for (const isa of ['avx512', 'avx2', 'portable']) {
      const dir = join(objRoot, `pdb_kernels_${isa}`, 'src')
      if (!existsSync(dir)) continue
      const objects = readdirSync(dir).filter((f) => f.endsWith('.o')).map((f) => join(dir, f))
      expect(objects.length).toBeGreaterThan(5)
      const text = execFileSync('nm', ['-C', '--defined-only', ...objects], { encoding: 'utf8' })
      const foreign = text.split('\n')
        .map((l) => /^[0-9a-f]+ ([A-Za-z]) (.*)$/.exec(l))
        .filter((m): m is RegExpExecArray => m !== null && /[A-Z]/.test(m[1]) && m[2] !== 'DW.ref.__gxx_personality_v0')
        .map((m) => m[2])
        .filter((name) => !name.includes(`pdb::${isa}::`))
      expect(foreign, isa).toEqual([])
    }
  })
})

// The product's blocks against the ones oMLX wrote itself for the same prompts, for the cases of the
// end-to-end record (harness/fixtures/mlx/product-bridge.json, made by make-product-bridge-proof.sh;
// oMLX's blocks in product-bridge-blocks/<case>/; all but the flash schedule's f32 case, see
// CI_CASES). No MLX here: the product's path (harness/mlx/product-bridge.ts: the capture hook under
// the case's sidecar, then the omlx kind's target) writes the blocks again, and they are compared
// with oMLX's tensor by tensor.
//   - f32 (cache math `decoder` under the f32 profile): the hook's attention inputs from our engine's
//     live f32 prefill. Two engines' float32: every tensor within relative error 1e-5 (the bound of
//     omlx-kind.test.ts), each tensor's identical fraction, worst ulp and relative error printed.
//   - mlx-cpu: the sidecar `export-weights --cache-math mlx-cpu`, the hook fed the attention inputs
//     oMLX's model computed (product-bridge-blocks/<case>-attn-inputs.safetensors). Every element
//     bit-identical but each window's oldest row, which our capture does not hold (zeros;
//     docs/omlx.md shows nothing reads it, and the record's logits are bit-identical); every
//     differing element is printed with its index and both values.
// The store's geometry must record the sidecar's cache math. One more test flips one bit of a copy of an oMLX block and checks that the comparison reports it.
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { beforeAll, describe, expect, it } from 'vitest'
import { exportWeights, type Sidecar } from '../../src/capture/index.ts'
import { readSafetensors } from '../../src/formats/safetensors/index.ts'
import { checkpointDigest, loadCheckpoint, makeCheckpoint, type LoadedCheckpoint } from '../../src/model/checkpoint/index.ts'
import { DeepseekV4Engine } from '../../src/model/engine/index.ts'
import {
  compareBlocks, describeComparisons, elementDifferences, isWindow, readBlock, showDifference, type Block, type ElementDifference,
} from '../../harness/mlx/compare-blocks.ts'
import { writeProductBlocks } from '../../harness/mlx/product-bridge.ts'
import { parseFrontConfig } from '../../src/config/index.ts'
import { omlxDecoderKind } from '../../src/decoders/omlx/index.ts'
import { omlxTarget } from '../../src/decoders/omlx/target.ts'
import { buildSetup } from '../../src/front/index.ts'
import { tinyModelForFile } from '../blocks/helpers.ts'

const FX = fileURLToPath(new URL('../../harness/fixtures/', import.meta.url))
const BLOCKS = join(FX, 'mlx/product-bridge-blocks')
const F32_REL_BOUND = 1e-5

interface RecordCase { case: string, checkpoint: string, prompt_tokens: number, cache_math: string, profile: string, blocks_written: number }
const RECORD = JSON.parse(readFileSync(join(FX, 'mlx/product-bridge.json'), 'utf8')) as { cases: RecordCase[] }
// The prompts the script bridged (make-product-bridge-proof.sh's case table).
const PROMPTS: Record<number, string> = { 301: 'tokens-301.json', 1100: 'tokens-1100.json' }

const held = tinyModelForFile()
const checkpoints = new Map<string, { dir: string, ckpt: LoadedCheckpoint, digest: string }>()
const sidecars = new Map<string, Sidecar>()

function presetOf (c: RecordCase): string {
  return c.case.replace(/-t\d+(-mlx-cpu)?$/, '')
}

async function checkpointFor (preset: string): Promise<{ dir: string, ckpt: LoadedCheckpoint, digest: string }> {
  let got = checkpoints.get(preset)
  if (got === undefined) {
    if (preset === 'tiny') {
      got = { dir: held.model.dir, ckpt: held.model.ckpt, digest: held.digest }
    } else {
      const dir = held.model.scratch(preset)
      await makeCheckpoint({ preset, seed: 1, out: dir })
      got = { dir, ckpt: await loadCheckpoint(dir), digest: await checkpointDigest(dir) }
    }
    checkpoints.set(preset, got)
  }
  return got
}

async function sidecarFor (preset: string, dir: string, math: string): Promise<Sidecar> {
  const key = `${preset}-${math}`
  let s = sidecars.get(key)
  if (s === undefined) {
    s = math === 'mlx-cpu'
      ? await exportWeights({ model: dir, profile: 'decoder', cacheMath: 'mlx-cpu', blockSize: 256, out: held.model.scratch(`sidecar-${key}`) })
      : await exportWeights({ model: dir, profile: math, blockSize: 256, out: held.model.scratch(`sidecar-${key}`) })
    sidecars.set(key, s)
  }
  return s
}

/** The blocks of one oMLX directory by hash. */
async function blocksIn (root: string): Promise<Map<string, Block>> {
  const out = new Map<string, Block>()
  for (const sub of readdirSync(root)) {
    if (!/^[0-9a-f]$/.test(sub)) continue
    for (const f of readdirSync(join(root, sub))) if (f.endsWith('.safetensors')) out.set(f.replace(/\.safetensors$/, ''), await readBlock(join(root, sub, f)))
  }
  return out
}

/** A window holding max_size = sliding_window rows: its row 0 is the oldest, which no query reads. */
function holdsOldestRow (name: string, shape: readonly number[], window: number): boolean {
  return isWindow(name) && shape.length === 4 && shape[2] === window
}

interface CaseResult { lines: string[], metadata: string[], structure: string[], exact: string[], read: ElementDifference[], unread: ElementDifference[], f32Worst: Array<{ name: string, rel: number }> }

/** Ours against oMLX's, block by block; every difference as a line. */
function compareCase (label: string, ours: Map<string, Block>, theirs: Map<string, Block>, exact: boolean, window: number): CaseResult {
  const r: CaseResult = { lines: [], metadata: [], structure: [], exact: [], read: [], unread: [], f32Worst: [] }
  const cmps = []
  for (const [hash, block] of ours) {
    const other = theirs.get(hash)
    if (other === undefined) { r.structure.push(`${hash}: no oMLX block under this key`); continue }
    const cmp = compareBlocks(block, other)
    cmps.push(cmp)
    r.metadata.push(...cmp.metadata.map((m) => `${hash.slice(0, 12)} ${m}`))
    r.structure.push(...cmp.structure.map((m) => `${hash.slice(0, 12)} ${m}`))
    r.exact.push(...cmp.exact.filter((e) => !e.identical).map((e) => `${hash.slice(0, 12)} ${e.name}: bytes differ`))
    if (!exact) {
      for (const t of cmp.tensors) r.f32Worst.push({ name: `${hash.slice(0, 12)} ${t.name}`, rel: t.readRows.relError })
      continue
    }
    for (const t of cmp.tensors) {
      if (t.all.identical === t.all.elements) continue
      const a = block.tensors.get(t.name)!
      const oldest = holdsOldestRow(t.name, a.shape, window)
      for (const d of elementDifferences(`${hash.slice(0, 12)} ${t.name}`, a, other.tensors.get(t.name)!)) {
        if (oldest && d.index[2] === 0) r.unread.push(d)
        else r.read.push(d)
      }
    }
  }
  r.lines.push(...describeComparisons(label, cmps))
  for (const m of [...r.metadata, ...r.structure, ...r.exact]) r.lines.push(`  difference: ${m}`)
  for (const d of r.read) r.lines.push(`  difference: ${showDifference(d)}`)
  if (r.unread.length > 0) {
    const tensors = new Set(r.unread.map((d) => d.tensor)).size
    r.lines.push(`  the windows' oldest row (unread): ${r.unread.length} elements in ${tensors} tensors differ, ours ${r.unread.every((d) => d.ours === 0) ? 'all zeros' : 'NOT all zeros'}`)
  }
  return r
}

async function productBlocksFor (c: RecordCase, workDir: string): Promise<{ ours: Map<string, Block>, window: number }> {
  const preset = presetOf(c)
  const { dir, ckpt, digest } = await checkpointFor(preset)
  expect(digest, `${c.case}: the record's checkpoint (re-run harness/mlx/make-product-bridge-proof.sh)`).toBe(c.checkpoint)
  const sidecar = await sidecarFor(preset, dir, c.cache_math === 'mlx-cpu' ? 'mlx-cpu' : c.profile)
  expect(sidecar.profile.name).toBe(c.profile)
  const parsed = JSON.parse(readFileSync(join(FX, PROMPTS[c.prompt_tokens]), 'utf8')) as number[] | { ids: number[] }
  const tokens = (Array.isArray(parsed) ? parsed : parsed.ids).slice(0, c.prompt_tokens)
  const source = c.cache_math === 'mlx-cpu'
    ? { recorded: (await readSafetensors(join(BLOCKS, `${c.case}-attn-inputs.safetensors`))).tensors, chunk: 256 }
    : { engine: DeepseekV4Engine.fromCheckpoint(ckpt, c.profile) }
  const w = await writeProductBlocks({ cfg: ckpt.config, sidecar, tokens, blockSize: 256, modelName: `pd-bridge-${preset}-seed1`, source, workDir })
  expect(w.written, 'blocks written, as in the record').toBe(c.blocks_written)
  return { ours: await blocksIn(w.store), window: ckpt.config.slidingWindow }
}

// Every case of the record but the flash schedule's f32 one (its live 43-layer f32 prefill alone
// takes longer than all the others together); its mlx-cpu twin runs in a few seconds.
const CI_CASES = RECORD.cases.filter((c) => presetOf(c) === 'tiny' || c.cache_math === 'mlx-cpu')

describe('the product\'s blocks against oMLX\'s own, for each case of product-bridge.json', () => {
  it('the record holds both cache maths, and oMLX\'s blocks (plus MLX\'s attention inputs for mlx-cpu) are committed for each case', () => {
    expect(new Set(CI_CASES.map((c) => c.cache_math))).toEqual(new Set(['decoder', 'mlx-cpu']))
    for (const c of RECORD.cases) {
      expect(existsSync(join(BLOCKS, c.case)), c.case).toBe(true)
      if (c.cache_math === 'mlx-cpu') expect(existsSync(join(BLOCKS, `${c.case}-attn-inputs.safetensors`)), c.case).toBe(true)
    }
  })

  for (const c of CI_CASES) {
    it(`${c.case} (${c.prompt_tokens} tokens, cache math ${c.cache_math}, profile ${c.profile})`, async () => {
      const { ours, window } = await productBlocksFor(c, held.model.scratch(c.case))
      const theirs = await blocksIn(join(BLOCKS, c.case))
      expect([...ours.keys()].sort(), 'block keys (oMLX\'s hash chain under its model name)').toEqual([...theirs.keys()].sort())
      const r = compareCase(`${c.case}: product vs oMLX`, ours, theirs, c.cache_math === 'mlx-cpu', window)
      console.log(r.lines.join('\n'))
      expect(r.metadata).toEqual([])
      expect(r.structure).toEqual([])
      expect(r.exact).toEqual([])
      if (c.cache_math !== 'mlx-cpu') {
        const worst = r.f32Worst.reduce((a, b) => (b.rel > a.rel ? b : a))
        console.log(`${c.case}: worst relative error ${worst.rel.toExponential(2)} (${worst.name}), bound ${F32_REL_BOUND}`)
        for (const t of r.f32Worst) expect(t.rel, t.name).toBeLessThanOrEqual(F32_REL_BOUND)
      } else {
        expect(r.read.map(showDifference), 'every element a query reads, bit for bit').toEqual([])
        expect(r.unread.every((d) => d.ours === 0), 'the only other differences: the windows\' oldest row, zeros in ours').toBe(true)
      }
    })
  }

  it('the store records the cache math: oMLX\'s directory opened without the mlx-cpu sidecar\'s refuses its capture; the front door\'s setup passes it', async () => {
    const c = CI_CASES.find((x) => x.cache_math === 'mlx-cpu')!
    const { dir, ckpt } = await checkpointFor(presetOf(c))
    const sidecar = await sidecarFor(presetOf(c), dir, 'mlx-cpu')
    const cacheDir = held.model.scratch('geometry')
    mkdirSync(cacheDir, { recursive: true })
    const open = async (cacheMath?: Sidecar['json']['cacheMath']) => await omlxTarget({
      cacheDir, modelName: 'geometry', cfg: ckpt.config, profile: 'decoder', blockSize: 256, log: () => {}, ...(cacheMath !== undefined ? { cacheMath } : {}),
    })
    const without = await open()
    expect(() => { without.checkSidecar(sidecar.json) }).toThrow(/cache math mlx-cpu\) gives geometry/)
    const withMath = await open(sidecar.json.cacheMath)
    expect(() => { withMath.checkSidecar(sidecar.json) }).not.toThrow()
    // The front door's setup opens the kind's target with the sidecar's cache math: no geometry problem.
    const base = { engine: omlxDecoderKind.name, url: 'http://127.0.0.1:9', model: dir, modelName: 'geometry', cacheDir, blockSize: 256, profile: 'decoder' }
    const { config } = parseFrontConfig({ decoder: base, prefill: { url: 'http://127.0.0.1:9' }, share: { url: 'http://127.0.0.1:9' }, sidecar: sidecar.dir })
    const setup = await buildSetup(config, omlxDecoderKind, 'geometry', () => {})
    expect(setup.problem).toBeUndefined()
  })

  describe('the comparison reports a one-bit change', () => {
    const c = CI_CASES.find((x) => x.cache_math === 'mlx-cpu')!
    let ours: Map<string, Block>
    let flipped: string
    let window: number
    beforeAll(async () => {
      ({ ours, window } = await productBlocksFor(c, held.model.scratch(`${c.case}-flip`)))
      // A copy of oMLX's blocks with one bit of one pooled value flipped (the low mantissa bit).
      flipped = held.model.scratch('flipped')
      for (const sub of readdirSync(join(BLOCKS, c.case))) {
        mkdirSync(join(flipped, sub), { recursive: true })
        for (const f of readdirSync(join(BLOCKS, c.case, sub))) copyFileSync(join(BLOCKS, c.case, sub, f), join(flipped, sub, f))
      }
    })

    it('names the tensor, the index and both values', async () => {
      const [hash, block] = [...(await blocksIn(flipped)).entries()][0]
      const name = [...block.tensors.keys()].find((n) => !isWindow(n) && block.tensors.get(n)!.dtype === 'BF16' && block.tensors.get(n)!.data.length > 64)!
      const file = join(flipped, hash[0], `${hash}.safetensors`)
      const bytes = readFileSync(file)
      const header = Number(bytes.readBigUInt64LE(0))
      const offsets = (JSON.parse(bytes.subarray(8, 8 + header).toString('utf8')) as Record<string, { data_offsets: [number, number] }>)[name].data_offsets
      const at = 8 + header + offsets[0] + 2 * 5 // element 5, little-endian: its low byte first
      bytes[at] ^= 1
      writeFileSync(file, bytes)
      const r = compareCase('flipped copy', ours, await blocksIn(flipped), true, window)
      console.log(r.lines.filter((l) => l.includes('difference')).join('\n'))
      expect(r.read).toHaveLength(1)
      expect(r.read[0].tensor).toBe(`${hash.slice(0, 12)} ${name}`)
      const shape = block.tensors.get(name)!.shape
      expect(r.read[0].index.reduce((flat, x, d) => flat * shape[d] + x, 0), 'the flipped element').toBe(5)
      expect(r.read[0].ours).not.toBe(r.read[0].theirs)
      expect(r.lines.some((l) => l.startsWith(`  difference: ${hash.slice(0, 12)} ${name}[`))).toBe(true)
    })
  })
})

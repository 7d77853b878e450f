// Retrieval depends on the rope geometry of the pooled entries. The match rides on compress-rope
// pairs 16..19 (docs/needle-checkpoint.md): they turn at most 0.64 rad natively over 8,192 tokens,
// but a cache written with YaRN factor 1 instead of 32 turns them by 0.8..2.5 rad per 1,024 tokens
// of absolute position. A bridged prefix built by the capture hook from such a stale sidecar misses
// a needle above the native window that the same decoder retrieves natively; the corrected sidecar
// retrieves it. A factor-16 sidecar cannot be caught this way (the budget shows why); the gate's table
// and bit-exact checks catch it (suites/consistency).
import { mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { needleCases } from '../../harness/make-needle-cases.ts'
import { exportWeights } from '../../src/capture/index.ts'
import { presetConfig } from '../../src/model/checkpoint/index.ts'
import { angleBudget, angleBudgetTable } from '../../src/model/checkpoint/needle/angle-budget.ts'
import { DeepseekV4Engine } from '../../src/model/engine/index.ts'
import { answer, bridgedAnswer, makeNeedle, removeDir, tempDir } from './helpers.ts'

let root: string
let base: string
let engine: DeepseekV4Engine
const BLOCK = 256

// Export a sidecar as if the checkpoint's config had compress YaRN factor `factor`.
async function sidecarWithFactor (factor: number): Promise<string> {
  const src = join(root, `cfg-f${factor}`)
  mkdirSync(src)
  for (const f of readdirSync(base)) if (f !== 'config.json') symlinkSync(join(base, f), join(src, f))
  const cfg = JSON.parse(readFileSync(join(base, 'config.json'), 'utf8'))
  cfg.rope_parameters.compress.factor = factor
  writeFileSync(join(src, 'config.json'), JSON.stringify(cfg))
  const out = join(root, `sidecar-f${factor}`)
  await exportWeights({ model: src, profile: 'decoder', out, blockSize: BLOCK })
  return out
}

beforeAll(async () => {
  root = tempDir('needle-stale')
  base = await makeNeedle(join(root, 'ckpt'))
  engine = await DeepseekV4Engine.load(base, 'decoder')
})
afterAll(() => removeDir(root))

describe('the angle budget', () => {
  it('keeps native alignment above the threshold and factor-1 stale alignment below it, above the native window', () => {
    const b = angleBudget(presetConfig('needle'), 1)
    expect(b.nativeWindow).toBe(1024)
    expect(b.pairs.map((p) => p.pair)).toEqual([16, 17, 18, 19])
    expect(Math.max(...b.pairs.map((p) => p.nativeAngleAtMaxDistance))).toBeLessThan(0.65)
    expect(b.nativeAlignment.min).toBeGreaterThan(b.threshold + 0.15)
    expect(b.staleAlignment.max).toBeLessThan(b.threshold - 0.15)
  })

  it('cannot separate a factor-16 sidecar: at distance = position the stale pairs line up exactly', () => {
    const b = angleBudget(presetConfig('needle'), 16)
    expect(b.staleAlignment.max).toBeCloseTo(1, 12)
    expect(b.staleAlignment.atDistance).toBe(b.staleAlignment.atPosition)
  })
})

describe('a bridged prefix from a stale sidecar', () => {
  const above = needleCases().find((c) => c.name === 'L4096-d0.5')!
  const below = needleCases().find((c) => c.name === 'L2048-d0')!
  const bridgedOf = (ids: readonly number[]) => Math.floor((ids.length - 1) / BLOCK) * BLOCK

  it('the needle sits above the native window and inside the bridged blocks', () => {
    expect(above.needles[0].position).toBeGreaterThan(1024)
    expect(above.needles[0].position).toBeLessThan(bridgedOf(above.ids))
    expect(below.needles[0].position).toBeLessThan(64)
  })

  it('misses above the native window with factor 1, retrieves with the corrected factor, and natively', async () => {
    const want = above.ids[above.needles[0].position]
    expect(answer(engine, above.ids)).toBe(want)
    const correct = await sidecarWithFactor(32)
    const stale = await sidecarWithFactor(1)
    expect(await bridgedAnswer(engine, correct, above.ids, bridgedOf(above.ids))).toBe(want)
    expect(await bridgedAnswer(engine, stale, above.ids, bridgedOf(above.ids))).not.toBe(want)
    // Near position 0 the stale error is tiny: the same stale sidecar still retrieves.
    expect(await bridgedAnswer(engine, stale, below.ids, bridgedOf(below.ids))).toBe(below.ids[below.needles[0].position])
  })
})

describe('docs/needle-checkpoint.md', () => {
  it('shows the factor-1 angle budget exactly as angleBudgetTable renders it', () => {
    const doc = readFileSync(new URL('../../docs/needle-checkpoint.md', import.meta.url), 'utf8')
    expect(doc).toContain(angleBudgetTable(angleBudget(presetConfig('needle'), 1)))
  })
})

// Quarantine moves blocks of another geometry aside by renaming them into <root>/_quarantine/<run>/,
// never deleting; quarantined files are never indexed.
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { readFile, readdir, stat, mkdir, writeFile } from 'node:fs/promises'
import { join, relative } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { SafetensorsFile, writeSafetensors, type Tensor } from '../../src/formats/safetensors/index.ts'
import { QUARANTINE_DIR, blockPath, quarantineFile, quarantineForeignGeometry } from '../../src/decode/store/index.ts'
import { BLOCK, GEOMETRY_A, GEOMETRY_B, blockPayload, openStore, tempDir, tokens } from './helpers.ts'

const run = promisify(execFile)
const bin = new URL('../../bin/pd-bridge.mjs', import.meta.url).pathname

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({ dir, cleanup } = await tempDir()))
afterEach(async () => await cleanup())

/** Blocks 0-1 under geometry A, 2-3 (same model, tokens of another prompt) under B, one of another model under B. */
async function mixedStore (): Promise<{ a: string[], b: string[], other: string }> {
  const { store: storeA } = await openStore(dir)
  const a = storeA.keysFor(tokens(2 * BLOCK, 1))
  for (const [i, k] of a.entries()) await storeA.put(k, blockPayload(i))
  const { store: storeB } = await openStore(dir, { geometryFingerprint: GEOMETRY_B })
  const b = storeB.keysFor(tokens(2 * BLOCK, 2))
  for (const [i, k] of b.entries()) await storeB.put(k, blockPayload(i))
  const { store: other } = await openStore(dir, { geometryFingerprint: GEOMETRY_B, modelName: '/models/other' })
  const [o] = other.keysFor(tokens(BLOCK, 3))
  await other.put(o, blockPayload(0))
  return { a, b, other: o }
}

async function filesUnder (root: string): Promise<string[]> {
  const out: string[] = []
  const walk = async (d: string): Promise<void> => {
    for (const e of await readdir(d, { withFileTypes: true })) {
      if (e.isDirectory()) await walk(join(d, e.name))
      else out.push(relative(root, join(d, e.name)))
    }
  }
  await walk(root)
  return out.sort()
}

describe('quarantineForeignGeometry renames blocks of another geometry aside', () => {
  it('moves only the model\'s foreign-geometry blocks, bytes unchanged, into <root>/_quarantine/<run>/<hex>/', async () => {
    const { a, b, other } = await mixedStore()
    const bytes = await Promise.all(b.map(async (k) => await readFile(blockPath(dir, k))))
    const report = await quarantineForeignGeometry(dir, { geometryFingerprint: GEOMETRY_A, modelName: '/models/tiny-dsv4' })
    expect(report.moved.map((m) => m.hash).sort()).toEqual([...b].sort())
    expect(report).toMatchObject({ kept: 2, otherModels: 1, unreadable: [] })
    expect(report.runDir.startsWith(join(dir, QUARANTINE_DIR) + '/')).toBe(true)
    for (const [i, k] of b.entries()) {
      await expect(stat(blockPath(dir, k))).rejects.toThrow()
      const moved = join(report.runDir, k[0], `${k}.safetensors`)
      expect((await readFile(moved)).equals(bytes[i])).toBe(true)
    }
    for (const k of [...a, other]) expect((await stat(blockPath(dir, k))).isFile()).toBe(true)
  })

  it('also moves blocks with no geometry fingerprint at all (as oMLX itself writes them)', async () => {
    const { a } = await mixedStore()
    const f = await SafetensorsFile.open(blockPath(dir, a[1]))
    const tensors: Record<string, Tensor> = {}
    for (const name of f.tensors.keys()) tensors[name] = await f.read(name)
    const { geometry_fingerprint: _dropped, ...meta } = f.metadata
    await f.close()
    await writeSafetensors(blockPath(dir, a[1]), tensors, meta)
    const report = await quarantineForeignGeometry(dir, { geometryFingerprint: GEOMETRY_A, modelName: '/models/tiny-dsv4' })
    expect(report.moved.find((m) => m.hash === a[1])).toMatchObject({ why: 'no geometry fingerprint' })
    expect(report.moved).toHaveLength(3)
    expect(report.kept).toBe(1)
  })

  it('moves nothing in a dry run', async () => {
    await mixedStore()
    const before = await filesUnder(dir)
    const report = await quarantineForeignGeometry(dir, { geometryFingerprint: GEOMETRY_A, dryRun: true })
    expect(report.moved).toHaveLength(3)
    expect(await filesUnder(dir)).toEqual(before)
  })

  it('never overwrites a file already in the quarantine', async () => {
    const { b } = await mixedStore()
    const runDir = join(dir, QUARANTINE_DIR, 'run')
    await mkdir(join(runDir, b[0][0]), { recursive: true })
    await writeFile(join(runDir, b[0][0], `${b[0]}.safetensors`), 'earlier copy')
    await expect(quarantineFile(blockPath(dir, b[0]), runDir)).rejects.toThrow(/already exists; nothing was moved/)
    expect(await readFile(join(runDir, b[0][0], `${b[0]}.safetensors`), 'utf8')).toBe('earlier copy')
    expect((await stat(blockPath(dir, b[0]))).isFile()).toBe(true)
  })
})

describe('quarantined files are never indexed', () => {
  it('leaves them out of a scan, which does not even look at them', async () => {
    await mixedStore()
    await quarantineForeignGeometry(dir, { geometryFingerprint: GEOMETRY_A })
    const { store, events } = await openStore(dir, { geometryFingerprint: GEOMETRY_B })
    expect(store.size).toBe(0)
    // Only the two geometry-A blocks remain to be refused; none of the quarantined ones is read.
    expect(events.filter((e) => e.kind === 'refused')).toHaveLength(2)
  })
})

describe('a write over an incompatible block under the same key quarantines the old file first', () => {
  it('keeps the old bytes in the quarantine and serves the new block', async () => {
    const { store: old } = await openStore(dir, { geometryFingerprint: GEOMETRY_B })
    const [k] = old.keysFor(tokens(BLOCK))
    await old.put(k, blockPayload(0))
    const oldBytes = await readFile(blockPath(dir, k))
    const { store, events } = await openStore(dir)
    const put = await store.put(k, blockPayload(0))
    expect(put.written).toBe(true)
    const q = events.find((e) => e.kind === 'quarantined')
    expect(q).toMatchObject({ hash: k, why: expect.stringMatching(/^geometry: /) })
    expect((await readFile((q as { to: string }).to)).equals(oldBytes)).toBe(true)
    expect(await store.has(k)).toBe(true)
  })
})

describe('pd-bridge cache quarantine and cache scan, as a user runs them', () => {
  it('moves the foreign blocks and reports what it did; scan shows the result', async () => {
    const { b } = await mixedStore()
    const q = await run(process.execPath, [bin, 'cache', 'quarantine', dir, '--geometry', GEOMETRY_A, '--model-name', '/models/tiny-dsv4'])
    expect(q.stdout).toMatch(/moved 2 block\(s\) to .*_quarantine.*; kept 2; other models 1; unreadable 0/)
    for (const k of b) expect(q.stdout).toContain(`moved ${k} (geometry ${GEOMETRY_B})`)
    const s = await run(process.execPath, [bin, 'cache', 'scan', dir])
    expect(s.stdout).toContain(`${dir}: 3 block files`)
    expect(s.stdout).toContain(`geometry ${GEOMETRY_A}: 2`)
    expect(s.stdout).toContain(`geometry ${GEOMETRY_B}: 1`)
  })

  it('refuses a geometry that is not a fingerprint, exit code 2', async () => {
    const r = await run(process.execPath, [bin, 'cache', 'quarantine', dir, '--geometry', 'abc']).catch((e: { code: number, stderr: string }) => e)
    expect((r as { code: number }).code).toBe(2)
    expect((r as { stderr: string }).stderr).toMatch(/--geometry must be 64 lowercase hex digits/)
  })
})

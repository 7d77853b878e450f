// Every suites/**/*.test.ts file is in exactly one vitest project (vitest.config.ts), so `vitest run`
// runs each once and none is skipped; and the assignment rules themselves (suites/support/projects.ts).
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import config, { PROJECT_LISTS } from '../../vitest.config.ts'
import { HANG_LIMIT_MS } from './hang-limit.ts'
import { assignProjects, assignmentProblems, listTestFiles } from './projects.ts'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))

describe('the projects of vitest.config.ts', () => {
  const files = listTestFiles(ROOT)
  const assigned = assignProjects(files, PROJECT_LISTS)

  it('put every test file under suites/ in exactly one project, and every entry names a file', () => {
    expect(files.length).toBeGreaterThan(0)
    expect(assignmentProblems(assigned)).toEqual([])
    const counted = Object.values(assigned.files).reduce((n, list) => n + list.length, 0)
    expect(counted).toBe(files.length)
  })

  it('hand vitest those files as each project\'s include, nothing else', () => {
    const projects = (config.test?.projects ?? []) as Array<{ test: { name: string, include: string[] } }>
    expect(projects.map((p) => p.test.name).sort()).toEqual(Object.keys(PROJECT_LISTS).sort())
    const included = projects.flatMap((p) => p.test.include)
    expect([...included].sort()).toEqual(files)
    expect(new Set(included).size).toBe(included.length)
  })

  // The unit project runs its files in shared workers (isolate: false), so a file there must not
  // change what the next file in the same worker sees. These are the ways to do it that vitest
  // itself cannot undo between files; a file that needs one belongs in integration.
  it('keep unit files free of state that would leak into the next file of a shared worker', () => {
    const leaks: Array<[RegExp, string]> = [
      [/\bvi\.(mock|doMock|unmock|doUnmock|resetModules)\(/, 'module mocks'],
      [/\bvi\.(stubGlobal|stubEnv)\(/, 'stubbed globals or env'],
      [/\bprocess\.chdir\(/, 'process.chdir'],
      [/\bprocess\.env(\.\w+|\[[^\]]+\])\s*=(?!=)|\bdelete\s+process\.env\b/, 'writes to process.env'],
      [/\bObject\.assign\(\s*process\.env\b/, 'writes to process.env'],
    ]
    const found: string[] = []
    for (const file of assigned.files.unit) {
      const text = readFileSync(join(ROOT, file), 'utf8')
      for (const [re, what] of leaks) if (re.test(text)) found.push(`${file}: ${what} (move it to INTEGRATION)`)
    }
    expect(found).toEqual([])
  })

  it('keep the shared settings in every project', () => {
    for (const p of (config.test?.projects ?? []) as Array<{ test: Record<string, unknown> }>) {
      const limits = p.test.name === 'unit' ? { testTimeout: 60_000, hookTimeout: 120_000 } : { testTimeout: HANG_LIMIT_MS, hookTimeout: HANG_LIMIT_MS }
      expect(p.test, String(p.test.name)).toMatchObject({ pool: 'forks', ...limits, env: { PD_PROGRESS: 'off' } })
      expect(p.test.maxWorkers, String(p.test.name)).toBeGreaterThanOrEqual(1)
    }
  })
})

describe('the wall-clock limits of integration and e2e tests', () => {
  // A test that sets its own limit below the hang limit fails on a loaded machine although it is
  // correct (suites/llama-cpp/demo.test.ts did, at load 10); one at or above it is a second home for
  // the one limit (the adversary smoke repeated 900_000). Each such limit is refused here.
  const ownLimit = /^\s*\}\)?, ([0-9_]+)\)\s*$|vi\.setConfig\(\{[^}]*(?:test|hook)Timeout: ([0-9_]+)/gm

  it('no integration or e2e file sets a per-test or per-hook limit of its own', () => {
    const found: string[] = []
    const assigned = assignProjects(listTestFiles(ROOT), PROJECT_LISTS)
    for (const file of [...assigned.files.integration, ...assigned.files.e2e]) {
      const text = readFileSync(join(ROOT, file), 'utf8')
      for (const m of text.matchAll(ownLimit)) found.push(`${file}: ${m[0].trim()}`)
    }
    expect(found).toEqual([])
  })

  it('the check sees a short limit where one is set', () => {
    const text = "it('x', async () => {\n  await run()\n}, 60_000)\nvi.setConfig({ testTimeout: 300_000 })\n"
    expect([...text.matchAll(ownLimit)].map((m) => m[1] ?? m[2])).toEqual(['60_000', '300_000'])
  })
})

describe('assignProjects', () => {
  const tree = ['suites/a/one.test.ts', 'suites/a/two.test.ts', 'suites/b/c/three.test.ts', 'suites/ab/four.test.ts']

  it('reads a folder entry as every file under it, at any depth, and no sibling that shares its prefix', () => {
    const a = assignProjects(tree, { x: ['suites/a/', 'suites/b/'], y: ['suites/ab/four.test.ts'] })
    expect(a.files).toEqual({ x: ['suites/a/one.test.ts', 'suites/a/two.test.ts', 'suites/b/c/three.test.ts'], y: ['suites/ab/four.test.ts'] })
    expect(assignmentProblems(a)).toEqual([])
  })

  it('names files in no list, files in two, entries that match nothing and entries with wildcards', () => {
    const a = assignProjects(tree, { x: ['suites/a/', 'suites/gone.test.ts'], y: ['suites/a/two.test.ts', 'suites/b/**/*.test.ts'] })
    expect(a.unclassified).toEqual(['suites/b/c/three.test.ts', 'suites/ab/four.test.ts'])
    expect(a.overlaps).toEqual([{ file: 'suites/a/two.test.ts', projects: ['x', 'y'] }])
    expect(a.stale).toEqual([{ project: 'x', entry: 'suites/gone.test.ts' }])
    expect(a.malformed).toEqual([{ project: 'y', entry: 'suites/b/**/*.test.ts' }])
    expect(assignmentProblems(a)).toHaveLength(5)
  })
})

describe('listTestFiles', () => {
  it('finds *.test.ts at any depth, relative and sorted, and nothing else', () => {
    const root = mkdtempSync(join(tmpdir(), 'pd-bridge-projects-'))
    try {
      for (const f of ['suites/z.test.ts', 'suites/a/b/deep.test.ts', 'suites/a/helpers.ts', 'suites/a/x.test.mjs', 'suites/node_modules/m.test.ts']) {
        mkdirSync(dirname(join(root, f)), { recursive: true })
        writeFileSync(join(root, f), '')
      }
      expect(listTestFiles(root)).toEqual(['suites/a/b/deep.test.ts', 'suites/z.test.ts'])
    } finally {
      rmSync(root, { recursive: true, force: true })
    }
  })
})

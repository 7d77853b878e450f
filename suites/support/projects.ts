// Which vitest project each suites/**/*.test.ts file runs in (vitest.config.ts names the lists).
// Plain node only (no vitest, no glob library), so the config and the check in projects.test.ts
// use one and the same assignment: what the check asserts is what vitest runs.
import { readdirSync } from 'node:fs'
import { join, relative, sep } from 'node:path'

/**
 * One project's list: each entry is a test file (`suites/a/b.test.ts`) or a folder with a trailing
 * slash (`suites/a/`: every test file under it, at any depth). Nothing else: no wildcards, so an
 * entry is read the same way everywhere.
 */
export type ProjectList = readonly string[]

/** The assignment of the tree's test files to projects, and what did not fit. */
export interface Assignment {
  /** project name -> its files (repository-relative, '/'-separated, sorted). */
  files: Record<string, string[]>
  /** Files no list names. */
  unclassified: string[]
  /** Files more than one list names, with those lists. */
  overlaps: Array<{ file: string, projects: string[] }>
  /** Entries that name no test file (a typo, or a file renamed or removed). */
  stale: Array<{ project: string, entry: string }>
  /** Entries that are neither a `.test.ts` file nor a folder ending in `/`. */
  malformed: Array<{ project: string, entry: string }>
}

/** Every `*.test.ts` file under `root/dir`, repository-relative with '/' separators, sorted. */
export function listTestFiles (root: string, dir = 'suites'): string[] {
  const out: string[] = []
  const walk = (abs: string): void => {
    for (const e of readdirSync(abs, { withFileTypes: true })) {
      if (e.name === 'node_modules' || e.name.startsWith('.')) continue
      const p = join(abs, e.name)
      if (e.isDirectory()) walk(p)
      else if (e.isFile() && e.name.endsWith('.test.ts')) out.push(relative(root, p).split(sep).join('/'))
    }
  }
  walk(join(root, dir))
  return out.sort()
}

/** Whether `entry` (file or folder/) names `file`. */
export function entryMatches (entry: string, file: string): boolean {
  return entry.endsWith('/') ? file.startsWith(entry) : file === entry
}

/** Assign `files` to the projects of `lists`: each file to every list that names it. */
export function assignProjects (files: readonly string[], lists: Readonly<Record<string, ProjectList>>): Assignment {
  const names = Object.keys(lists)
  const a: Assignment = { files: Object.fromEntries(names.map((n) => [n, []])), unclassified: [], overlaps: [], stale: [], malformed: [] }
  for (const project of names) {
    for (const entry of lists[project]) {
      if (!entry.endsWith('/') && !entry.endsWith('.test.ts')) a.malformed.push({ project, entry })
      else if (/[*?{}[\]!]/.test(entry)) a.malformed.push({ project, entry })
      else if (!files.some((f) => entryMatches(entry, f))) a.stale.push({ project, entry })
    }
  }
  for (const file of files) {
    const hits = names.filter((n) => lists[n].some((e) => entryMatches(e, file)))
    if (hits.length === 0) a.unclassified.push(file)
    else if (hits.length > 1) a.overlaps.push({ file, projects: hits })
    for (const n of hits) a.files[n].push(file)
  }
  return a
}

/** A readable account of what is wrong with an assignment (empty when every file is in exactly one list). */
export function assignmentProblems (a: Assignment): string[] {
  return [
    ...a.unclassified.map((f) => `${f}: in no project (add it to UNIT, INTEGRATION or E2E in vitest.config.ts)`),
    ...a.overlaps.map((o) => `${o.file}: in ${o.projects.length} projects (${o.projects.join(', ')}); it must be in exactly one`),
    ...a.stale.map((s) => `${s.project}: entry ${s.entry} names no test file`),
    ...a.malformed.map((s) => `${s.project}: entry ${s.entry} is neither a .test.ts file nor a folder ending in '/' (no wildcards)`),
  ]
}

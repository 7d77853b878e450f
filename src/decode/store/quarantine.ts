// Moving blocks aside without deleting them: a rename into <root>/_quarantine/<run>/<hex>/<hash>.safetensors.
// The run directory has the same layout as a store, so it can be inspected or compared with
// verify-blocks, and no scan of the root ever looks inside it.
import { link, mkdir, rename, unlink } from 'node:fs/promises'
import { basename, dirname, join } from 'node:path'
import { randomBytes } from 'node:crypto'
import { BlockStoreError } from './errors.ts'
import { syncDirectory } from '../../formats/atomic-file.ts'
import { listBlockDir, readBlockHeader, requireDirectory } from './block-file.ts'
import { pathExists } from '../../formats/path-exists.ts'

/** The folder under a store root that holds quarantined blocks. */
export const QUARANTINE_DIR = '_quarantine'

/** A fresh run directory name: UTC time, pid and a random suffix, so two runs never share one. */
export function quarantineRunName (now = new Date()): string {
  const stamp = now.toISOString().replace(/[:.]/g, '-')
  return `${stamp}-${process.pid}-${randomBytes(3).toString('hex')}`
}

/**
 * Move one block file into `<runDir>/<its subdirectory>/<its name>`. Never overwrites: the move is a
 * hard link (which fails if the target exists) and an unlink of the old name; where hard links are
 * not allowed, a rename after checking the target is free. Returns the new path.
 */
export async function quarantineFile (path: string, runDir: string): Promise<string> {
  const target = join(runDir, basename(dirname(path)), basename(path))
  await mkdir(dirname(target), { recursive: true })
  try {
    await link(path, target)
    await unlink(path)
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code
    if (code === 'EEXIST') throw new BlockStoreError(path, `quarantine target ${target} already exists; nothing was moved`)
    if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EXDEV') throw new BlockStoreError(path, `cannot quarantine: ${(e as Error).message}`)
    if (await pathExists(target)) throw new BlockStoreError(path, `quarantine target ${target} already exists; nothing was moved`)
    await rename(path, target)
  }
  await syncDirectory(dirname(target))
  await syncDirectory(dirname(path))
  return target
}

/** Which blocks `quarantineForeignGeometry` moves. */
export interface QuarantineOptions {
  /** The geometry fingerprint blocks must carry to stay. */
  geometryFingerprint: string
  /** Only blocks of this model are considered (the directory may be shared by several models). */
  modelName?: string
  /** Also move files that cannot be read as blocks at all. */
  includeUnreadable?: boolean
  /** Report what would move, move nothing. */
  dryRun?: boolean
}

/** What a quarantine run did. */
export interface QuarantineReport {
  /** The run directory (not created when nothing moved). */
  runDir: string
  moved: { hash: string, from: string, to: string, why: string }[]
  kept: number
  /** Blocks of other models, left alone. */
  otherModels: number
  unreadable: { path: string, problem: string, movedTo?: string }[]
}

/**
 * Move aside every block (of `modelName`, when given) whose geometry fingerprint is not the expected
 * one, including blocks with none (written without a geometry, e.g. by oMLX itself). Renames only.
 */
export async function quarantineForeignGeometry (root: string, options: QuarantineOptions): Promise<QuarantineReport> {
  await requireDirectory(root)
  const report: QuarantineReport = { runDir: join(root, QUARANTINE_DIR, quarantineRunName()), moved: [], kept: 0, otherModels: 0, unreadable: [] }
  for (const entry of await listBlockDir(root)) {
    if (entry.kind !== 'block') continue
    let header
    try {
      header = await readBlockHeader(entry.path)
    } catch (e) {
      const problem = e instanceof BlockStoreError ? e.problem : (e as Error).message
      const item: QuarantineReport['unreadable'][number] = { path: entry.path, problem }
      if (options.includeUnreadable === true && options.dryRun !== true) item.movedTo = await quarantineFile(entry.path, report.runDir)
      report.unreadable.push(item)
      continue
    }
    const { info } = header
    if (options.modelName !== undefined && info.modelName !== options.modelName) {
      report.otherModels++
      continue
    }
    if (info.geometryFingerprint === options.geometryFingerprint) {
      report.kept++
      continue
    }
    const why = info.geometryFingerprint === undefined ? 'no geometry fingerprint' : `geometry ${info.geometryFingerprint}`
    const to = options.dryRun === true ? join(report.runDir, entry.hash[0], basename(entry.path)) : await quarantineFile(entry.path, report.runDir)
    report.moved.push({ hash: entry.hash, from: entry.path, to, why })
  }
  return report
}

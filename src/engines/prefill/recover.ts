// Start-up recovery: a capture whose manifest still says `running` when a new engine holds the
// root's lock was left by a process that died mid-capture (killed, crashed, power cut). Nothing
// will ever finish it, so it is sealed `failed` with the reason, and no reader waits on it; a
// streaming capture's spill files (`.spill/`) go with it. A capture directory its engine died in
// before the first manifest was in place (empty, or only that manifest's temporary file) never
// started: it holds nothing to keep and is removed.
import { readdir, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { finishManifest } from '../../capture/manifest-updates.ts'
import { removeSpillDir } from '../../capture/spill.ts'
import { isValidRequestId, MANIFEST_FILE, readManifest } from '../../wire/manifest.ts'

/** What recovery did under one root. */
export interface RecoveryReport {
  /** Request ids whose running manifest was sealed failed. */
  markedFailed: string[]
  /** Capture directories that never started (no manifest, nothing but its temporary file): removed. */
  removed: string[]
  /** Directories that look like captures but whose manifest could not be read, with why (kept for a look). */
  unreadable: Array<{ requestId: string, problem: string }>
}

/** True when `dir` holds nothing but (maybe) the first manifest's temporary file: a capture that never started. */
async function neverStarted (dir: string): Promise<boolean> {
  const names = await readdir(dir).catch(() => undefined)
  return names !== undefined && names.every((n) => n.startsWith(`${MANIFEST_FILE}.partial-`))
}

/**
 * Seal every `running` capture under `root` as failed with `error`. Call it only while holding the
 * root's lock (acquireRootLock), so no live process owns any of them.
 */
export async function failOrphanedCaptures (root: string, error: string): Promise<RecoveryReport> {
  const report: RecoveryReport = { markedFailed: [], removed: [], unreadable: [] }
  const entries = await readdir(root, { withFileTypes: true })
  for (const entry of entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
    if (!entry.isDirectory() || !isValidRequestId(entry.name)) continue
    const dir = join(root, entry.name)
    try {
      const m = await readManifest(dir)
      if (m.state !== 'running') continue
      removeSpillDir(dir)
      await finishManifest(dir, 'failed', { error })
      report.markedFailed.push(entry.name)
    }
    catch (e) {
      if (await neverStarted(dir)) {
        await rm(dir, { recursive: true, force: true })
        report.removed.push(entry.name)
      } else report.unreadable.push({ requestId: entry.name, problem: (e as Error).message })
    }
  }
  return report
}

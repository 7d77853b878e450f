// Start-up recovery: a capture whose manifest still says `running` when a new engine holds the
// root's lock was left by a process that died mid-capture (killed, crashed, power cut). Nothing
// will ever finish it, so it is sealed `failed` with the reason, and no reader waits on it; a
// streaming capture's spill files (`.spill/`) go with it.
import { readdir } from 'node:fs/promises'
import { join } from 'node:path'
import { finishManifest } from '../../capture/manifest-updates.ts'
import { removeSpillDir } from '../../capture/spill.ts'
import { isValidRequestId, readManifest } from '../../wire/manifest.ts'

/** What recovery did under one root. */
export interface RecoveryReport {
  /** Request ids whose running manifest was sealed failed. */
  markedFailed: string[]
  /** Directories that look like captures but whose manifest could not be read, with why. */
  unreadable: Array<{ requestId: string, problem: string }>
}

/**
 * Seal every `running` capture under `root` as failed with `error`. Call it only while holding the
 * root's lock (acquireRootLock), so no live process owns any of them.
 */
export async function failOrphanedCaptures (root: string, error: string): Promise<RecoveryReport> {
  const report: RecoveryReport = { markedFailed: [], unreadable: [] }
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
      report.unreadable.push({ requestId: entry.name, problem: (e as Error).message })
    }
  }
  return report
}

// Temporary directories for the suites: one per test file or case, named after what it holds, and
// removed by the test that made it.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/** A fresh temporary directory `pd-bridge-<prefix>-XXXXXX` and its remover. */
export function tempDir (prefix: string): { dir: string, remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), `pd-bridge-${prefix}-`))
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) }
}

/**
 * A temporary directory for the rest of this process (a test worker): made on first use, removed
 * when the process exits. For things no test looks at afterwards, such as child logs.
 */
export function processTempDir (prefix: string): string {
  let made = perProcess.get(prefix)
  if (made === undefined) {
    made = tempDir(prefix)
    process.once('exit', made.remove)
    perProcess.set(prefix, made)
  }
  return made.dir
}

const perProcess = new Map<string, { dir: string, remove: () => void }>()

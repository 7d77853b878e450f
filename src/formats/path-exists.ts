// Whether a path exists (anything stat can see); for checks before a create, never as a lock.
import { stat } from 'node:fs/promises'

/** True when `path` exists. */
export async function pathExists (path: string): Promise<boolean> {
  try {
    await stat(path)
    return true
  } catch {
    return false
  }
}

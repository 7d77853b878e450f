// Deleting a sealed capture (DELETE /v1/prefill/{id}): the consumer says its blocks are written and
// verified, so the capture's files may go. The directory is first renamed to a dot name (which is
// never a request id, so the share stops serving it and a status poll stops finding it at that
// instant), then removed; a crash between the two leaves only a dot directory, which the next
// start sweeps. A capture that can still change (queued, running, or a `running` manifest) is 409.
import { randomBytes } from 'node:crypto'
import { readdir, rename, rm, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { captureDir, isValidRequestId, readManifest } from '../../wire/manifest.ts'
import { ApiError } from './api-error.ts'
import { isSettled, type PrefillJob } from './job.ts'

/** The prefix of a capture directory being deleted. */
export const DELETING_PREFIX = '.deleting-'

async function exists (dir: string): Promise<boolean> {
  try {
    return (await stat(dir)).isDirectory()
  }
  catch {
    return false
  }
}

/**
 * Delete the capture of `requestId` under `root`. `job` is the engine's record of it, if it has
 * one. Throws ApiError 404 (no such request or capture) or 409 (still queued or running).
 */
export async function deleteCapture (root: string, requestId: string, job: PrefillJob | undefined): Promise<{ deleted: boolean }> {
  if (job !== undefined && !isSettled(job.state)) {
    throw new ApiError(409, 'conflict_error', `request ${JSON.stringify(requestId)} is ${job.state}: a capture can be deleted only once it is sealed`)
  }
  const dir = isValidRequestId(requestId) ? captureDir(root, requestId) : undefined
  if (dir === undefined || !await exists(dir)) {
    if (job !== undefined) return { deleted: false }
    throw new ApiError(404, 'not_found_error', `no prefill request ${JSON.stringify(requestId)} (not remembered, and no capture under the capture root)`)
  }
  // Not this engine's job (an earlier engine's): its manifest decides. A running one has a writer.
  const state = await readManifest(dir).then((m) => m.state, () => undefined)
  if (job === undefined && state === 'running') {
    throw new ApiError(409, 'conflict_error', `the capture of ${JSON.stringify(requestId)} is running: it can be deleted only once it is sealed`)
  }
  const doomed = join(root, `${DELETING_PREFIX}${requestId}-${randomBytes(4).toString('hex')}`)
  await rename(dir, doomed)
  await rm(doomed, { recursive: true, force: true })
  return { deleted: true }
}

/** Remove what deletions interrupted by a crash left behind (call while holding the root's lock). */
export async function sweepDeletions (root: string): Promise<string[]> {
  const swept: string[] = []
  for (const name of await readdir(root)) {
    if (!name.startsWith(DELETING_PREFIX)) continue
    await rm(join(root, name), { recursive: true, force: true })
    swept.push(name)
  }
  return swept
}

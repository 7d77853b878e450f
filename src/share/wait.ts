// A conditional GET that may wait (RFC 7240's `Prefer: wait=N`): when its If-None-Match still
// matches, the share holds the 304 until the capture's directory changes (a segment, the index or
// the manifest renamed into it), N seconds pass (at most MAX_WAIT_S), the client goes away or the
// server closes, and says `Preference-Applied: wait=N`. A client following a running capture (the
// streamed write's SegmentMirror) then looks again the moment there is something to see, instead of
// polling on a timer. Waits are bounded in number: past MAX_WAITERS the answer comes at once,
// without Preference-Applied, as from a share that does not wait.
import { watch } from 'node:fs'
import type { ServerResponse } from 'node:http'

/** The longest wait a client may ask for, in seconds. */
export const MAX_WAIT_S = 10
/** How many requests may wait at once. */
export const MAX_WAITERS = 64

/** The seconds of a `Prefer: wait=N` header (clamped to MAX_WAIT_S), or undefined when it asks none. */
export function preferredWait (header: string | string[] | undefined): number | undefined {
  const value = Array.isArray(header) ? header.join(',') : header
  if (value === undefined) return undefined
  const m = /(?:^|[,;\s])wait\s*=\s*"?(\d{1,9})"?\s*(?:$|[,;])/i.exec(value)
  if (m === null) return undefined
  const seconds = Number(m[1])
  return seconds === 0 ? undefined : Math.min(seconds, MAX_WAIT_S)
}

/** The waits in progress on one server, so `close` can end them all. */
export class ShareWaits {
  private readonly ends = new Set<() => void>()
  private closed = false

  /**
   * While `unchanged()` (checked once the watch is on, so no change slips between the two), wait for
   * `dir` to change, for `seconds`, for the client to go away or for `close`. False (at once) when it
   * changed already, too many wait, the server is closing, or the directory cannot be watched.
   */
  async wait (dir: string, seconds: number, res: ServerResponse, unchanged: () => Promise<boolean>): Promise<boolean> {
    if (this.closed || this.ends.size >= MAX_WAITERS) return false
    let watcher
    let end = (): void => {}
    const over = new Promise<void>((resolve) => { end = resolve })
    try {
      watcher = watch(dir, { persistent: false }, end)
    } catch {
      return false
    }
    watcher.on('error', end)
    const timer = setTimeout(end, seconds * 1000)
    res.on('close', end)
    this.ends.add(end)
    try {
      if (!(await unchanged())) return false
      await over
    } finally {
      this.ends.delete(end)
      clearTimeout(timer)
      watcher.close()
      res.off('close', end)
    }
    return true
  }

  /** End every wait now (the server is closing); later waits answer at once. */
  close (): void {
    this.closed = true
    for (const end of this.ends) end()
  }
}

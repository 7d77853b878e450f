// The streamed write's wait between two looks at a running capture (stream-write.ts). On the local
// mount it ends as soon as the capture directory changes (fs.watch: the engine renames a segment,
// the index or the manifest into it), with the poll interval as the fallback for a directory not
// there yet or a file system that reports nothing. Through the share it is a long poll: the share
// holds a conditional GET until the capture changes (SegmentMirror.waitForChange, `Prefer: wait`),
// with a short sleep where the share answered at once. Either way the loop sees a seal within a few
// milliseconds, not up to a whole poll interval later, and costs nothing while nothing happens.
import { watch, type FSWatcher } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'

/** The sleep between looks at the share when it did not hold its answer (no manifest yet, a share that does not wait). */
export const SHARE_POLL_MS = 20

/** What a wait watches: the local capture directory, or the share through a long poll (true: it waited or something changed). */
export type WakeSource = { dir: string } | { longPoll: () => Promise<boolean> }

/** Waits for a capture to change, or for the poll interval. `close` when done. */
export class CaptureWake {
  private watcher: FSWatcher | undefined
  private changed = false
  private wakeUp: (() => void) | undefined

  constructor (private readonly source: WakeSource, private readonly pollMs: number, private readonly signal: AbortSignal) {}

  /** Resolves when the capture changed since the last wait, after the poll interval, or on abort. */
  async wait (): Promise<void> {
    if ('longPoll' in this.source) {
      if (!(await this.source.longPoll())) await sleep(Math.min(this.pollMs, SHARE_POLL_MS), undefined, { signal: this.signal }).catch(() => {})
      return
    }
    // A change just before the watch began is not reported: the first watched wait looks again at once.
    if (this.startWatching(this.source.dir)) return
    if (this.changed) {
      this.changed = false
      return
    }
    const stop = new AbortController()
    const woken = new Promise<void>((resolve) => { this.wakeUp = resolve })
    await Promise.race([woken, sleep(this.pollMs, undefined, { signal: AbortSignal.any([this.signal, stop.signal]) }).catch(() => {})])
    stop.abort()
    this.wakeUp = undefined
    this.changed = false
  }

  close (): void {
    this.watcher?.close()
    this.watcher = undefined
    this.wakeUp?.()
  }

  // The engine makes the directory after the submit's answer: until then each wait tries again.
  private startWatching (dir: string): boolean {
    if (this.watcher !== undefined) return false
    try {
      this.watcher = watch(dir, { persistent: false }, () => {
        this.changed = true
        this.wakeUp?.()
      })
      // A watch that breaks (the directory removed) leaves the poll.
      this.watcher.on('error', () => {
        this.watcher?.close()
      })
      return true
    } catch {
      this.watcher = undefined
      return false
    }
  }
}

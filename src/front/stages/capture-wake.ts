// The streamed write's wait between two looks at a running capture (stream-write.ts). On the local
// mount it ends as soon as the capture directory changes (fs.watch: the engine renames a segment,
// the index or the manifest into it), with the poll interval as the fallback for a directory not
// there yet or a file system that reports nothing. Through the share there is no event to watch: the
// wait is a short poll, which the mirror's conditional GETs make cheap. Either way the loop sees a
// seal within a few milliseconds rather than up to a whole poll interval later.
import { watch, type FSWatcher } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'

/** How often the loop looks at the share while nothing changes (two 304s a look). */
export const SHARE_POLL_MS = 20

/** Waits for a capture directory to change, or for the poll interval. `close` when done. */
export class CaptureWake {
  private watcher: FSWatcher | undefined
  private changed = false
  private wakeUp: (() => void) | undefined

  /** `dir`: the local capture directory to watch, or undefined (the share: a short poll only). */
  constructor (private readonly dir: string | undefined, private readonly pollMs: number, private readonly signal: AbortSignal) {}

  /** Resolves when the directory changed since the last wait, after the poll interval, or on abort. */
  async wait (): Promise<void> {
    if (this.dir === undefined) {
      await sleep(Math.min(this.pollMs, SHARE_POLL_MS), undefined, { signal: this.signal }).catch(() => {})
      return
    }
    // A change just before the watch began is not reported: the first watched wait looks again at once.
    if (this.startWatching(this.dir)) return
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

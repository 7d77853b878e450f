// The in-memory index of servable blocks: hash -> entry, kept in least-recently-used order, with
// the running byte total the size limit is checked against.
import type { BlockInfo } from './metadata.ts'
import type { LayerRef } from './decode.ts'

/** One indexed block. */
export interface IndexEntry {
  hash: string
  path: string
  fileSize: number
  /** File mtime when indexed (a changed file is re-read on rescan). */
  mtimeMs: number
  /** When it was last used (ms since the epoch); LRU order follows it. */
  lastAccess: number
  info: BlockInfo
  plan: LayerRef[]
}

/** Blocks in LRU order: iteration goes from least to most recently used. */
export class BlockIndex {
  private readonly entries = new Map<string, IndexEntry>()
  private bytes = 0

  /** Number of blocks. */
  get size (): number {
    return this.entries.size
  }

  /** Bytes of all indexed files. */
  get totalBytes (): number {
    return this.bytes
  }

  /** The entry of `hash`, without marking it used. */
  get (hash: string): IndexEntry | undefined {
    return this.entries.get(hash)
  }

  /** Add (or replace) an entry as the most recently used. */
  add (entry: IndexEntry): void {
    this.remove(entry.hash)
    this.entries.set(entry.hash, entry)
    this.bytes += entry.fileSize
  }

  /** Mark an entry used now: it moves to the most recent end. */
  touch (hash: string, now: number): void {
    const e = this.entries.get(hash)
    if (e === undefined) return
    this.entries.delete(hash)
    e.lastAccess = now
    this.entries.set(hash, e)
  }

  /** Drop an entry; returns it, or undefined when it was not there. */
  remove (hash: string): IndexEntry | undefined {
    const e = this.entries.get(hash)
    if (e === undefined) return undefined
    this.entries.delete(hash)
    this.bytes -= e.fileSize
    return e
  }

  /** The least recently used entry other than `except`. */
  oldest (except?: string): IndexEntry | undefined {
    for (const e of this.entries.values()) if (e.hash !== except) return e
    return undefined
  }

  /** Replace everything with `entries`, ordered by last access (oldest first). */
  reset (entries: IndexEntry[]): void {
    this.entries.clear()
    this.bytes = 0
    for (const e of [...entries].sort((a, b) => a.lastAccess - b.lastAccess || (a.hash < b.hash ? -1 : 1))) this.add(e)
  }

  /** Entries from least to most recently used. */
  list (): IndexEntry[] {
    return [...this.entries.values()]
  }
}

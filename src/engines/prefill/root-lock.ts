// One engine per capture root. The engine holds `<root>/.prefill-engine.lock` (its pid) while it
// runs; a lock whose process is gone is stale and taken over. Holding the lock is what lets a new
// engine say that every `running` capture under the root has no live owner. The name starts with
// a dot, so it can never be a request id (nor be served as a capture).
import { open, readFile, rm } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { ConfigError } from '../../errors.ts'

/** The lock file's name inside the capture root. */
export const LOCK_FILE = '.prefill-engine.lock'

// Roots this process holds: a lock file naming our own pid is ours only if it is listed here (in a
// container the pid of a restarted engine is often the same as its predecessor's).
const heldHere = new Set<string>()

/** What the lock file records. */
export interface LockRecord {
  pid: number
  startedAt: string
}

/** A held lock. */
export interface RootLock {
  path: string
  /** The previous holder, when a stale lock was taken over. */
  staleFrom?: LockRecord
  /** Remove the lock file (only if it is still ours). */
  release (): Promise<void>
}

/** True if `pid` names a live process that is a pd-bridge prefill engine (a reused pid is not). */
export async function isLiveEngine (pid: number): Promise<boolean> {
  try {
    process.kill(pid, 0)
  }
  catch (e) {
    // EPERM: it exists but belongs to someone else; treat it as alive rather than steal its root.
    return (e as NodeJS.ErrnoException).code === 'EPERM'
  }
  try {
    // The engine runs as `pd-bridge prefill-engine ...`: the subcommand is one whole argument.
    const argv = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0')
    return argv.includes('prefill-engine')
  }
  catch {
    // No /proc (not Linux): the process exists, so assume it is the engine.
    return true
  }
}

async function readRecord (path: string): Promise<LockRecord | undefined> {
  try {
    const r = JSON.parse(await readFile(path, 'utf8')) as Partial<LockRecord>
    return Number.isSafeInteger(r.pid) && typeof r.startedAt === 'string' ? { pid: r.pid as number, startedAt: r.startedAt } : undefined
  }
  catch {
    return undefined
  }
}

async function createExclusive (path: string, record: LockRecord): Promise<boolean> {
  try {
    const handle = await open(path, 'wx')
    try {
      await handle.writeFile(JSON.stringify(record) + '\n')
      await handle.sync()
    }
    finally {
      await handle.close()
    }
    return true
  }
  catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST') return false
    throw e
  }
}

/**
 * Take the capture root's lock for this process. A lock held by a live engine is a ConfigError
 * naming its pid; a stale one (its process gone, or unreadable) is replaced and reported.
 */
export async function acquireRootLock (root: string): Promise<RootLock> {
  const path = join(root, LOCK_FILE)
  if (heldHere.has(resolve(path))) throw new ConfigError('--capture-root', `${root} is already in use by a prefill engine in this process`)
  const mine: LockRecord = { pid: process.pid, startedAt: new Date().toISOString() }
  let staleFrom: LockRecord | undefined
  // Two tries: the second follows removing a stale lock; losing that race to another engine is a refusal.
  for (let attempt = 0; attempt < 2; attempt++) {
    if (await createExclusive(path, mine)) {
      heldHere.add(resolve(path))
      return {
        path,
        staleFrom,
        release: async () => {
          heldHere.delete(resolve(path))
          const now = await readRecord(path)
          if (now?.pid === mine.pid && now.startedAt === mine.startedAt) await rm(path, { force: true })
        },
      }
    }
    const holder = await readRecord(path)
    if (holder !== undefined && holder.pid !== process.pid && await isLiveEngine(holder.pid)) break
    staleFrom = holder ?? { pid: 0, startedAt: 'unknown' }
    await rm(path, { force: true })
  }
  const holder = await readRecord(path)
  throw new ConfigError('--capture-root', `${root} is in use by another prefill engine (pid ${holder?.pid ?? 'unknown'}, lock file ${path}); one engine per capture root`)
}

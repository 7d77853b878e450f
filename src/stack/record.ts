// The record of a running embedded stack, `<state>/stack.json`: who runs it, every child's pid,
// URL and log, and the front door's config file. `doctor` reads it to find the deployment; a
// second `serve` on the same state directory reads it to refuse politely. Written atomically.
import { readFileSync } from 'node:fs'
import { readFile, rm } from 'node:fs/promises'
import { writeFileAtomic } from '../formats/atomic-file.ts'

/** One process of the stack as recorded. */
export interface RecordedProcess {
  name: string
  pid: number
  url: string
  log: string
}

/** `<state>/stack.json`. */
export interface StackRecord {
  format: 'pd-bridge-stack/1'
  /** The supervisor (`pd-bridge serve` or `demo`). */
  supervisorPid: number
  startedAt: string
  preset: string
  seed: number
  stateDir: string
  frontConfig: string
  frontUrl: string
  processes: RecordedProcess[]
}

/** Write the record atomically (temporary sibling, fsync, rename). */
export async function writeStackRecord (path: string, record: StackRecord): Promise<void> {
  await writeFileAtomic(path, JSON.stringify(record, null, 2) + '\n')
}

/** The record at `path`, or undefined when there is none or it is not one. */
export async function readStackRecord (path: string): Promise<StackRecord | undefined> {
  let raw: unknown
  try {
    raw = JSON.parse(await readFile(path, 'utf8'))
  }
  catch {
    return undefined
  }
  const r = raw as Partial<StackRecord>
  if (r === null || typeof r !== 'object' || r.format !== 'pd-bridge-stack/1' || !Array.isArray(r.processes)) return undefined
  return r as StackRecord
}

/** Remove the record, but only if it is still this supervisor's (a newer stack may have replaced it). */
export async function removeStackRecord (path: string, supervisorPid: number): Promise<void> {
  const r = await readStackRecord(path)
  if (r !== undefined && r.supervisorPid === supervisorPid) await rm(path, { force: true })
}

/**
 * True when `pid` is a live process (signal 0 probes without sending anything). A zombie (exited,
 * not yet reaped: children of a killed supervisor wait for an init that may never reap them) is
 * not alive; on Linux /proc says which.
 */
export function isAlive (pid: number): boolean {
  try {
    process.kill(pid, 0)
  }
  catch (err) {
    // EPERM: it exists but belongs to someone else; still alive.
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false
  }
  let stat: string
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  }
  catch {
    return true
  }
  // "pid (comm) S ...": the state follows the last ')' (comm may itself hold parentheses).
  return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z'
}

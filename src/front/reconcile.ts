// What a front door that died (SIGKILL, a crash, a power cut) left behind, reconciled when the next
// one starts: its spool folders (captures streamed from the share, whole or half) are removed, and
// the captures of the bridges it was running are retired on the prefill engine under
// `capture.retain`, as an ended bridge's would be. A bridge marks itself in the spool's
// `.inflight/` from before its submit to its end, so a mark left there names a bridge nobody runs.
// A configured spool is reconciled only by the front door holding its lock (`.pd-front.lock`, a
// pid): another live front door on the same folder keeps it. A temporary spool carries its
// owner's pid in its name; those of dead owners are reconciled and removed. The decoder's store
// (ours) loses the temporary block files of writers that are gone: a block a dead front door was
// writing when it died (the decoder's own scan would also take them, but only at its next scan).
import { mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Logger } from 'pino'
import type { FrontConfig } from '../config/index.ts'
import { listBlockDir } from '../decode/store/block-file.ts'
import { pidAlive } from '../decode/store/store.ts'
import { isValidRequestId } from '../wire/manifest.ts'
import { callJson, joinUrl } from './http.ts'
import { retireCapture, type Retention } from './retention.ts'

/** The folder of in-flight marks inside a spool root. */
export const INFLIGHT_DIR = '.inflight'
/** The lock a front door holds on a configured spool root. */
export const SPOOL_LOCK = '.pd-front.lock'
const TEMP_SPOOL = 'pd-bridge-front-spool-'

/** The name prefix of this process's temporary spool (mkdtemp adds the rest). */
export function ownSpoolPrefix (): string {
  return join(tmpdir(), `${TEMP_SPOOL}${process.pid}-`)
}


/** Mark bridge `requestId` in flight under `spoolRoot` (before its submit). */
export async function markInflight (spoolRoot: string, requestId: string): Promise<void> {
  await mkdir(join(spoolRoot, INFLIGHT_DIR), { recursive: true })
  await writeFile(join(spoolRoot, INFLIGHT_DIR, requestId), '')
}

/** The bridge ended (whatever the outcome): its mark goes. */
export async function clearInflight (spoolRoot: string, requestId: string): Promise<void> {
  await rm(join(spoolRoot, INFLIGHT_DIR, requestId), { force: true })
}

async function sizeOf (path: string): Promise<number> {
  const st = await stat(path).catch(() => undefined)
  if (st === undefined) return 0
  if (!st.isDirectory()) return st.size
  let n = 0
  for (const e of await readdir(path).catch(() => [])) n += await sizeOf(join(path, e))
  return n
}

/** What one spool root held: request folders removed (with their bytes) and bridges that were in flight. */
interface Swept { removed: string[], bytes: number, interrupted: string[] }

/** Empty a spool root no live front door uses: every request folder goes; the in-flight marks are read, then go. */
async function sweepSpool (root: string): Promise<Swept> {
  const swept: Swept = { removed: [], bytes: 0, interrupted: [] }
  for (const e of await readdir(root, { withFileTypes: true }).catch(() => [])) {
    const path = join(root, e.name)
    if (e.name === INFLIGHT_DIR) {
      swept.interrupted.push(...(await readdir(path).catch(() => [])).filter(isValidRequestId))
      await rm(path, { recursive: true, force: true })
    } else if (e.isDirectory() && isValidRequestId(e.name)) {
      swept.bytes += await sizeOf(path)
      await rm(path, { recursive: true, force: true })
      swept.removed.push(e.name)
    }
  }
  return swept
}

/** Take the lock of a configured spool root; the live holder's pid when another front door has it. */
async function lockSpool (root: string): Promise<number | undefined> {
  await mkdir(root, { recursive: true })
  const path = join(root, SPOOL_LOCK)
  const holder = Number((await readFile(path, 'utf8').catch(() => '')).trim())
  if (Number.isSafeInteger(holder) && holder > 0 && holder !== process.pid && pidAlive(holder)) return holder
  await writeFile(path, `${process.pid}\n`)
  return undefined
}

/** Let go of a configured spool root's lock, if it is still ours. */
export async function unlockSpool (root: string): Promise<void> {
  const path = join(root, SPOOL_LOCK)
  if ((await readFile(path, 'utf8').catch(() => '')).trim() === String(process.pid)) await rm(path, { force: true })
}

/** What start-up reconciliation found, as its log line says. */
export interface FrontReconcileReport {
  /** Spool folders removed (request ids), their bytes, and temporary spools of dead front doors removed. */
  spoolRemoved: string[]
  spoolBytes: number
  tempSpoolsRemoved: number
  /** Bridges that were in flight when their front door died: their captures are retired in the background. */
  interrupted: string[]
  /** Temporary block files in the decoder's store whose writer (a dead front door or decoder) is gone: removed. */
  storeTempsRemoved: number
  /** Set when another live front door holds the configured spool: nothing there was touched. */
  spoolHeldBy?: number
}

/**
 * Remove the temporary block files (`<hash>.safetensors.partial-<pid>-...`) under the store `root`
 * whose writer's pid is gone: a block write that process never finished (it renames only a
 * complete, fsynced file). Those of live processes (a decoder writing now) are left alone.
 */
export async function sweepStoreTemps (root: string): Promise<number> {
  let n = 0
  for (const e of await listBlockDir(root).catch(() => [])) {
    if (e.kind !== 'temp' || e.pid === process.pid || pidAlive(e.pid)) continue
    await rm(e.path, { force: true })
    n++
  }
  return n
}

/**
 * Reconcile at start: the temporary block files of dead writers in the decoder's store `storeDir`
 * (ours), and the configured spool (under its lock), or the temporary spools of front doors that
 * are gone. Resolves once the spool is clean; `retire` then runs the interrupted
 * bridges' captures to their retention in the background.
 */
export async function reconcileSpools (spoolDir: string | undefined, ownSpool: boolean, storeDir?: string): Promise<FrontReconcileReport> {
  const report: FrontReconcileReport = { spoolRemoved: [], spoolBytes: 0, tempSpoolsRemoved: 0, interrupted: [], storeTempsRemoved: 0 }
  if (storeDir !== undefined) report.storeTempsRemoved = await sweepStoreTemps(storeDir)
  const add = (s: Swept): void => {
    report.spoolRemoved.push(...s.removed)
    report.spoolBytes += s.bytes
    report.interrupted.push(...s.interrupted)
  }
  if (spoolDir !== undefined && !ownSpool) {
    const holder = await lockSpool(spoolDir)
    if (holder !== undefined) return { ...report, spoolHeldBy: holder }
    add(await sweepSpool(spoolDir))
  }
  if (ownSpool) {
    for (const e of await readdir(tmpdir(), { withFileTypes: true }).catch(() => [])) {
      const m = new RegExp(`^${TEMP_SPOOL}(\\d+)-`).exec(e.name)
      if (m === null || !e.isDirectory() || Number(m[1]) === process.pid || pidAlive(Number(m[1]))) continue
      const dir = join(tmpdir(), e.name)
      add(await sweepSpool(dir))
      await rm(dir, { recursive: true, force: true })
      report.tempSpoolsRemoved++
    }
  }
  return report
}

const SEALED = new Set(['done', 'partial', 'failed'])

/**
 * An interrupted bridge's capture, once the engine has sealed it (a dead front door's request may
 * still be running there), retired under `capture.retain`: `none` deletes it, `failed` and `all`
 * keep it (an interrupted bridge is a failed one). With `verified`, the capture of a bridge whose
 * blocks were verified, whose delete was already decided and failed: it is deleted (FrontState.retireLater).
 * Never throws; gives up at `signal` or after `captureMs` of waiting.
 */
export async function retireInterrupted (config: FrontConfig, requestId: string, headers: Record<string, string>, signal: AbortSignal, verified = false): Promise<Retention | 'unsealed'> {
  const retain = verified ? 'none' : config.capture.retain
  if (retain !== 'none') return `kept: an interrupted bridge, and capture.retain is ${retain}`
  const prefillUrl = config.prefill.url as string
  const d = config.deadlines
  const end = Date.now() + d.captureMs
  while (!signal.aborted && Date.now() < end) {
    const a = await callJson('prefill engine', joinUrl(prefillUrl, `/v1/prefill/${encodeURIComponent(requestId)}`), { timeoutMs: d.linkMs, headers }).catch(() => undefined)
    if (a?.status === 404) return 'already gone'
    const state = (a?.body as { state?: unknown } | undefined)?.state
    if (typeof state === 'string' && SEALED.has(state)) return await retireCapture({ prefillUrl, requestId, state: 'done', retain, timeoutMs: d.deleteMs, headers })
    await new Promise((resolve) => setTimeout(resolve, d.pollMs))
  }
  return 'unsealed'
}

/** Log the report and retire each interrupted bridge's capture in the background (each outcome logged). */
export function startReconcile (report: FrontReconcileReport, config: FrontConfig, headers: Record<string, string>, logger: Logger, signal: AbortSignal): Promise<void> {
  logger.info({
    event: 'reconciled', spool_removed: report.spoolRemoved.length, spool_bytes: report.spoolBytes, temp_spools_removed: report.tempSpoolsRemoved,
    store_temps_removed: report.storeTempsRemoved,
    interrupted: report.interrupted, ...(report.spoolHeldBy === undefined ? {} : { spool_held_by: report.spoolHeldBy }),
  }, report.spoolHeldBy === undefined ? 'start-up reconciliation' : `the spool is held by live front door pid ${report.spoolHeldBy}: left as it is`)
  if (config.prefill.url === undefined) return Promise.resolve()
  return Promise.all(report.interrupted.map(async (id) => {
    const retention = await retireInterrupted(config, id, headers, signal)
    logger.info({ event: 'interrupted-capture', request_id: id, retention }, 'capture of an interrupted bridge')
  })).then(() => {})
}

// Crash rules in process: one engine per capture root (a lock naming the pid), a stale lock taken
// over, and on start every `running` manifest sealed failed while done/partial/failed ones stay.
import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { once } from 'node:events'
import { readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { addLayerFile, finishManifest, startCapture, type CaptureStart } from '../../src/capture/manifest-updates.ts'
import { readManifest } from '../../src/wire/manifest.ts'
import { ConfigError } from '../../src/errors.ts'
import { failOrphanedCaptures } from '../../src/engines/prefill/recover.ts'
import { acquireRootLock, isLiveEngine, LOCK_FILE } from '../../src/engines/prefill/root-lock.ts'
import { serializeSafetensors, tensorFrom } from '../../src/formats/safetensors/index.ts'
import { exists, tempDir } from './helpers.ts'

const tmp = tempDir('prefill-recovery')
afterAll(tmp.remove)
let n = 0
const freshRoot = async (): Promise<string> => {
  const { mkdir } = await import('node:fs/promises')
  const dir = join(tmp.dir, `root-${n++}`)
  await mkdir(dir)
  return dir
}

/** A process whose command line says prefill-engine, alive until killed. */
async function fakeEngine (): Promise<{ pid: number, kill: () => Promise<void> }> {
  const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)', 'prefill-engine'], { stdio: 'ignore' })
  await once(child, 'spawn')
  return { pid: child.pid as number, kill: async () => { child.kill('SIGKILL'); await once(child, 'exit') } }
}

describe('acquireRootLock: one engine per capture root', () => {
  it('writes the pid, refuses a second holder in this process, and release removes the file', async () => {
    const root = await freshRoot()
    const lock = await acquireRootLock(root)
    const record = JSON.parse(await readFile(join(root, LOCK_FILE), 'utf8')) as { pid: number }
    expect(record.pid).toBe(process.pid)
    await expect(acquireRootLock(root)).rejects.toThrow('already in use by a prefill engine in this process')
    await lock.release()
    expect(exists(join(root, LOCK_FILE))).toBe(false)
    const again = await acquireRootLock(root)
    expect(again.staleFrom).toBeUndefined()
    await again.release()
  })

  it('refuses a root whose lock names a live engine, with its pid', async () => {
    const root = await freshRoot()
    const other = await fakeEngine()
    try {
      await writeFile(join(root, LOCK_FILE), JSON.stringify({ pid: other.pid, startedAt: '2026-01-01T00:00:00.000Z' }))
      const e = await acquireRootLock(root).then(() => undefined, (err: unknown) => err)
      expect(e).toBeInstanceOf(ConfigError)
      expect((e as Error).message).toContain(`--capture-root: ${root} is in use by another prefill engine (pid ${other.pid}`)
    }
    finally {
      await other.kill()
    }
    // The same lock once its process is gone is stale, and taken over.
    const lock = await acquireRootLock(root)
    expect(lock.staleFrom?.pid).toBe(other.pid)
    await lock.release()
  })

  it('takes over a lock whose pid is reused by a process that is not an engine, or an unreadable lock', async () => {
    const root = await freshRoot()
    // Our parent (the vitest runner) is alive but not a prefill engine.
    await writeFile(join(root, LOCK_FILE), JSON.stringify({ pid: process.ppid, startedAt: '2026-01-01T00:00:00.000Z' }))
    expect(await isLiveEngine(process.ppid)).toBe(false)
    const lock = await acquireRootLock(root)
    expect(lock.staleFrom?.pid).toBe(process.ppid)
    await lock.release()
    await writeFile(join(root, LOCK_FILE), 'garbage')
    const second = await acquireRootLock(root)
    expect(second.staleFrom?.pid).toBe(0)
    await second.release()
  })
})

function layer (i: number): Uint8Array {
  return serializeSafetensors({ x: tensorFrom('F32', [2], new Float32Array([i, i + 1])) })
}

const start = (requestId: string): CaptureStart => ({ requestId, tokenCount: 10, sidecarFingerprint: 'f'.repeat(64), profile: 'decoder', numLayers: 2 })

describe('failOrphanedCaptures seals running captures as failed', () => {
  it('marks running ones (with or without layers), leaves sealed ones and non-captures alone', async () => {
    const root = await freshRoot()
    await startCapture(root, start('run-empty'))
    const half = await startCapture(root, start('run-half'))
    await addLayerFile(half, 0, layer(0))
    const done = await startCapture(root, start('done-1'))
    await addLayerFile(done, 0, layer(0))
    await addLayerFile(done, 1, layer(1))
    await finishManifest(done, 'done')
    await finishManifest(await startCapture(root, start('failed-1')), 'failed', { error: 'earlier' })
    const { mkdir } = await import('node:fs/promises')
    await mkdir(join(root, 'no-manifest'))
    // Died between creating the folder and renaming its first manifest into place: never started.
    await mkdir(join(root, 'never-started'))
    await writeFile(join(root, 'never-started', 'manifest.json.partial-1-abc'), '{')
    // Something else in a folder without a manifest: not the engine's to judge, kept for a look.
    await mkdir(join(root, 'stray'))
    await writeFile(join(root, 'stray', 'notes.txt'), 'x')
    await mkdir(join(root, '.hidden'))

    const report = await failOrphanedCaptures(root, 'engine restarted: test')
    expect(report.markedFailed).toEqual(['run-empty', 'run-half'])
    expect(report.removed).toEqual(['never-started', 'no-manifest'])
    expect(report.unreadable.map((u) => u.requestId)).toEqual(['stray'])
    expect(existsSync(join(root, 'never-started'))).toBe(false)
    expect(existsSync(join(root, 'stray', 'notes.txt'))).toBe(true)
    for (const id of ['run-empty', 'run-half']) {
      const m = await readManifest(join(root, id))
      expect([m.state, m.error]).toEqual(['failed', 'engine restarted: test'])
    }
    expect((await readManifest(join(root, 'run-half'))).layers.map((l) => l.index)).toEqual([0])
    expect((await readManifest(done)).state).toBe('done')
    expect((await readManifest(join(root, 'failed-1'))).error).toBe('earlier')
    // A second pass finds nothing left to seal.
    expect((await failOrphanedCaptures(root, 'again')).markedFailed).toEqual([])
  })
})

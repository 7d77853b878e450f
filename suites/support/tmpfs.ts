// A real small file system for tests of full and read-only stores: a tmpfs mounted in a scratch
// folder (root can mount one here and in CI; elsewhere the suites that need it are skipped).
import { execFileSync } from 'node:child_process'
import { closeSync, mkdirSync, openSync, writeSync } from 'node:fs'
import { join } from 'node:path'

/** Whether a tmpfs can be mounted (and unmounted) under `scratch`. */
export function canMountTmpfs (scratch: string): boolean {
  const at = join(scratch, 'mount-check')
  mkdirSync(at, { recursive: true })
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', at], { stdio: 'ignore' })
    execFileSync('umount', [at], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}

/** Mount a tmpfs of `size` (mount's syntax, e.g. `4m`) at `at`, creating the folder. */
export function mountTmpfs (at: string, size: string): void {
  mkdirSync(at, { recursive: true })
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', at])
}

/** Unmount `at` if it is mounted. */
export function unmountTmpfs (at: string): void {
  try { execFileSync('umount', [at]) } catch { /* not mounted */ }
}

/**
 * Write `file` until the file system is full: large writes, then small ones, down to single bytes,
 * so every page is taken. Returns the error codes that stopped each size (ENOSPC on a full tmpfs).
 */
export function fillUntilFull (file: string): string[] {
  const codes: string[] = []
  const fd = openSync(file, 'w')
  try {
    for (const size of [65536, 4096, 1]) {
      try { for (;;) writeSync(fd, Buffer.alloc(size, 1)) } catch (e) { codes.push((e as NodeJS.ErrnoException).code ?? String(e)) }
    }
  } finally {
    closeSync(fd)
  }
  return codes
}

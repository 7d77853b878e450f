// Shared helpers for the checkpoint suites: temp dirs and file hashes.
import { createHash } from 'node:crypto'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/** A fresh empty directory under the OS temp dir. */
export function tempDir (label: string): string {
  return mkdtempSync(join(tmpdir(), `pd-bridge-${label}-`))
}

/** Remove a directory made by tempDir. */
export function removeDir (dir: string): void {
  rmSync(dir, { recursive: true, force: true })
}

/** SHA-256 of every file in `dir`, by file name. */
export function hashFiles (dir: string): Record<string, string> {
  const out: Record<string, string> = {}
  for (const f of readdirSync(dir).sort()) out[f] = createHash('sha256').update(readFileSync(join(dir, f))).digest('hex')
  return out
}

/** Bytes of a typed array, for bit-exact comparison. */
export function bytesOf (v: ArrayBufferView): Uint8Array {
  return new Uint8Array(v.buffer, v.byteOffset, v.byteLength)
}

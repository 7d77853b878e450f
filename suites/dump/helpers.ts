// Shared by the dump suites: the CLI as a child process, the tiny seed-1 checkpoint the
// transformers fixtures were made from, and reading a dump back.
import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { readSafetensors, type Tensor } from '../../src/formats/safetensors/index.ts'
import { checkpointDigest } from '../../src/model/checkpoint/index.ts'
import { tinyCheckpoint } from '../support/checkpoints.ts'

const run = promisify(execFile)
const bin = new URL('../../bin/pd-bridge.mjs', import.meta.url).pathname

/** What a CLI run left: exit code and both streams. */
export interface CliResult { code: number, stdout: string, stderr: string }

/** Run `pd-bridge ...args` as a child process (never throws on a non-zero exit). */
export async function cli (...args: string[]): Promise<CliResult> {
  try {
    const { stdout, stderr } = await run(process.execPath, [bin, ...args], { maxBuffer: 1 << 24 })
    return { code: 0, stdout, stderr }
  }
  catch (err) {
    const e = err as { code: number, stdout: string, stderr: string }
    return { code: e.code, stdout: e.stdout, stderr: e.stderr }
  }
}

/** A path under harness/fixtures. */
export function fixturePath (name: string): string {
  return new URL(`../../harness/fixtures/${name}`, import.meta.url).pathname
}

/** A fresh scratch directory, the tiny seed-1 checkpoint (the run's shared one, read-only), its digest, and a cleanup. */
export async function scratchWithTinyCheckpoint (tag: string): Promise<{ dir: string, model: string, digest: string, dispose: () => void }> {
  const dir = mkdtempSync(join(tmpdir(), `pd-bridge-dump-${tag}-`))
  const model = tinyCheckpoint()
  return { dir, model, digest: await checkpointDigest(model), dispose: () => rmSync(dir, { recursive: true, force: true }) }
}

/** Read a safetensors file's tensors and metadata. */
export async function readDump (path: string): Promise<{ metadata: Record<string, string>, tensors: Map<string, Tensor> }> {
  return readSafetensors(path)
}

/** Whether two tensors have the same dtype, shape and bytes. */
export function sameBits (a: Tensor, b: Tensor): boolean {
  if (a.dtype !== b.dtype || a.shape.length !== b.shape.length || a.shape.some((d, i) => d !== b.shape[i])) return false
  if (a.data.length !== b.data.length) return false
  for (let i = 0; i < a.data.length; i++) if (a.data[i] !== b.data[i]) return false
  return true
}

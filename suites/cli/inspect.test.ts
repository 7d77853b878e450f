// `pd-bridge inspect` run as a real child process: what a user sees for good and broken files.
import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, describe, expect, it } from 'vitest'
import { tensorFrom, writeSafetensors } from '../../src/formats/safetensors/index.ts'

const run = promisify(execFile)
const bin = new URL('../../src/cli/pd-bridge.mjs', import.meta.url).pathname
const corpus = new URL('../formats/corpus/', import.meta.url).pathname
const dir = mkdtempSync(join(tmpdir(), 'pd-bridge-inspect-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

async function cli (...args: string[]): Promise<{ code: number, stdout: string, stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [bin, ...args])
    return { code: 0, stdout, stderr }
  }
  catch (err) {
    const e = err as { code: number, stdout: string, stderr: string }
    return { code: e.code, stdout: e.stdout, stderr: e.stderr }
  }
}

describe('pd-bridge inspect', () => {
  it('lists the tensors and metadata of a valid file', async () => {
    const path = join(dir, 'ok.safetensors')
    await writeSafetensors(path, { w: tensorFrom('F32', [2, 3], new Float32Array(6)) }, { format: 'pt' })
    const r = await cli('inspect', path)
    expect(r.code).toBe(0)
    expect(r.stdout).toContain('1 tensors')
    expect(r.stdout).toContain('metadata format = pt')
    expect(r.stdout).toMatch(/w {2}F32 \[2, 3\] {2}bytes 0\.\.24/)
  })

  it('names the file and the problem for a broken file, exit code 2', async () => {
    const r = await cli('inspect', join(corpus, 'byte-count-mismatch.safetensors'))
    expect(r.code).toBe(2)
    expect(r.stderr).toContain('byte-count-mismatch.safetensors')
    expect(r.stderr).toContain('needs 16')
    expect(r.stderr).not.toContain('    at ')
  })

  it('says a missing path is missing, without a stack trace', async () => {
    const r = await cli('inspect', join(dir, 'absent.safetensors'))
    expect(r.code).toBe(2)
    expect(r.stderr).toMatch(/absent\.safetensors: no such file or directory/)
    expect(r.stderr).not.toContain('    at ')
  })

  it('is listed with its arguments in the top-level --help', async () => {
    const r = await cli('--help')
    expect(r.code).toBe(0)
    expect(r.stdout).toContain('inspect [options] <path>')
    expect(r.stdout).toContain('make-checkpoint [options]')
  })
})

// `pd-bridge inspect` run as a real child process: what a user sees for good and broken files.
import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, describe, expect, it } from 'vitest'
import { tensorFrom, writeSafetensors } from '../../src/formats/safetensors/index.ts'

const run = promisify(execFile)
const bin = new URL('../../bin/pd-bridge.mjs', import.meta.url).pathname
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

  it('--geometry v4-flash: 6,584 B of pooled bf16 cache per token, as counted by hand from its 43 layers', async () => {
    // 20 CSA layers pool head_dim 512 and the indexer's 128 every 4 tokens, 23 HCA layers 512 every 128: bf16.
    const byHand = (20 * (512 / 4 + 128 / 4) + 23 * (512 / 128)) * 2
    expect(byHand).toBe(6584)
    const r = await cli('inspect', '--geometry', 'v4-flash')
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toContain('43: 0 sliding, 20 compressed-sparse (ratio 4), 23 heavily-compressed (ratio 128); window 128')
    expect(r.stdout).toContain(`pooled cache   6,584 B per token, ${(6584 * 2048).toLocaleString('en-US')} B (12.9 MiB) per block`)
    // Windows: 43 layers x 127 rows x 512 values; carries: 20 CSA layers x (kv + gate) x 4 x (512 + 128); bf16.
    const fixed = (43 * 127 * 512 + 20 * 2 * 4 * (512 + 128)) * 2
    expect(r.stdout).toContain(`fixed          ${fixed.toLocaleString('en-US')} B`)
    expect(r.stdout).toMatch(/capture memory [\d,]+ B per token/)
  })

  it('a checkpoint directory: its naming, formats, parameter count and geometry, then its tensors', async () => {
    const model = new URL('../../harness/fixtures/hf-saved', import.meta.url).pathname
    const r = await cli('inspect', model, '--block-size', '256')
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toContain('naming           deepseek: DeepSeek (save_pretrained / hub) names')
    expect(r.stdout).toContain('experts          one tensor per expert and projection')
    expect(r.stdout).toContain('weight formats   BF16 123, F32 75, I64 1')
    expect(r.stdout).toContain('parameters       1,561,965')
    expect(r.stdout).toContain('5: 1 sliding, 2 compressed-sparse (ratio 4), 2 heavily-compressed (ratio 128)')
    // 2 CSA x (128 + 128) / 4 + 2 HCA x 128 / 128 = 130 values per token, bf16.
    expect(r.stdout).toContain('pooled cache   260 B per token, 66,560 B per block')
    expect(r.stdout).toMatch(/: 199 tensors\n/)
  })

  it('refuses an unknown geometry, and a path with --geometry, in one line', async () => {
    const r = await cli('inspect', '--geometry', 'v9')
    expect(r.code).toBe(2)
    expect(r.stderr).toContain('--geometry: unknown "v9", expected one of v4-flash')
    const both = await cli('inspect', dir, '--geometry', 'v4-flash')
    expect(both.code).toBe(2)
    expect(both.stderr).toContain('give a path or --geometry, not both')
  })

  it('is listed with its arguments in the top-level --help', async () => {
    const r = await cli('--help')
    expect(r.code).toBe(0)
    expect(r.stdout).toContain('inspect [options] [path]')
    expect(r.stdout).toContain('make-checkpoint [options]')
  })
})

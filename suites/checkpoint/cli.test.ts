// `pd-bridge make-checkpoint` run as a real child process: it writes a loadable checkpoint,
// documents itself in --help, and refuses bad flags with clear messages.
import { describe, it, expect, afterAll } from 'vitest'
import { execFile } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { loadCheckpoint } from '../../src/model/checkpoint/index.ts'
import { removeDir, tempDir } from './helpers.ts'

const BIN = fileURLToPath(new URL('../../bin/pd-bridge.mjs', import.meta.url))
const run = promisify(execFile)
const dirs: string[] = []
afterAll(() => dirs.forEach(removeDir))

/** A temp dir removed after the suite. */
function scratch (label: string): string {
  const dir = tempDir(label)
  dirs.push(dir)
  return dir
}

async function cli (...args: string[]): Promise<{ code: number, stdout: string, stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [BIN, ...args], { timeout: 60_000 })
    return { code: 0, stdout, stderr }
  }
  catch (e) {
    const err = e as { code?: number, stdout?: string, stderr?: string }
    return { code: err.code ?? -1, stdout: err.stdout ?? '', stderr: err.stderr ?? '' }
  }
}

describe('make-checkpoint writes a loadable checkpoint', () => {
  it('makes tiny with --seed and --max-shard-bytes, and the result loads', async () => {
    const out = join(scratch('cli'), 'ck')
    const r = await cli('make-checkpoint', '--preset', 'tiny', '--seed', '5', '--out', out, '--max-shard-bytes', '4000000')
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toContain('122 tensors')
    expect(r.stdout).toContain('model.safetensors.index.json')
    const loaded = await loadCheckpoint(out)
    expect(loaded.weights.size).toBe(122)
    expect(loaded.tokenizer?.vocabSize).toBe(512)
  })
})

describe('--help documents the command', () => {
  it('lists make-checkpoint and each of its options', async () => {
    const r = await cli('--help')
    expect(r.code).toBe(0)
    for (const s of ['make-checkpoint', '--preset <name>', 'tiny | small', '--seed <n>', '--out <dir>', '--max-shard-bytes <n>', '--force']) {
      expect(r.stdout).toContain(s)
    }
  })
})

describe('bad flags give clear errors', () => {
  it('refuses an unknown preset, naming the choices', async () => {
    const r = await cli('make-checkpoint', '--preset', 'huge', '--seed', '1', '--out', join(scratch('cli-bad'), 'x'))
    expect(r.code).toBe(2)
    expect(r.stderr).toContain('--preset: unknown preset "huge", expected one of tiny, small')
  })

  it('refuses a seed that is not a non-negative integer', async () => {
    for (const seed of ['1.5', '-3', 'abc', '1e3']) {
      const r = await cli('make-checkpoint', '--preset', 'tiny', '--seed', seed, '--out', join(scratch('cli-bad'), 'x'))
      expect(r.code, seed).toBe(2)
      expect(r.stderr).toContain(`--seed must be a non-negative integer, got "${seed}"`)
    }
  })

  it('refuses a non-empty --out without --force, and replaces the checkpoint with it', async () => {
    const out = scratch('cli-nonempty')
    writeFileSync(join(out, 'notes.txt'), 'keep me')
    const r = await cli('make-checkpoint', '--preset', 'tiny', '--seed', '1', '--out', out)
    expect(r.code).toBe(2)
    expect(r.stderr).toContain('directory is not empty (pass --force')
    const forced = await cli('make-checkpoint', '--preset', 'tiny', '--seed', '1', '--out', out, '--force')
    expect(forced.code, forced.stderr).toBe(0)
    expect((await loadCheckpoint(out)).weights.size).toBe(122)
    expect(readFileSync(join(out, 'notes.txt'), 'utf8')).toBe('keep me')
  })
})

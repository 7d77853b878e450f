// Every refusal of `pd-bridge dump`, as a user sees it: exit code 2, one line on stderr that names
// the file or option and the problem, no stack trace, and no --out file left behind.
import { existsSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { tensorFrom, writeSafetensors } from '../../src/formats/safetensors/index.ts'
import { cli, fixturePath, scratchWithTinyCheckpoint } from './helpers.ts'

const TOKENS = fixturePath('tokens-301.json')
let scratch: Awaited<ReturnType<typeof scratchWithTinyCheckpoint>>
let counter = 0

beforeAll(async () => {
  scratch = await scratchWithTinyCheckpoint('errors')
})
afterAll(() => scratch?.dispose())

/** A path in the scratch directory, written with `content` when given. */
function file (name: string, content?: string | Uint8Array): string {
  const path = join(scratch.dir, name)
  if (content !== undefined) writeFileSync(path, content)
  return path
}

/** Run a dump that must be refused: checks exit code, a single message line, no stack, no output; returns stderr. */
async function refused (opts: { tokens?: string, profile?: string, out?: string, model?: string }, ...extra: string[]): Promise<string> {
  const out = opts.out ?? file(`never-${counter++}.safetensors`)
  const r = await cli('dump', '--model', opts.model ?? scratch.model, '--tokens', opts.tokens ?? TOKENS,
    '--profile', opts.profile ?? 'f32', '--out', out, ...extra)
  expect(r.code, r.stderr).toBe(2)
  expect(r.stderr).toMatch(/^pd-bridge: [^\n]+\n$/)
  expect(r.stderr).not.toContain('    at ')
  expect(r.stdout).toBe('')
  if (opts.out === undefined) expect(existsSync(out)).toBe(false)
  return r.stderr
}

describe.concurrent('a bad --tokens file is refused, naming the file and the problem', () => {
  it('missing file', async () => {
    expect(await refused({ tokens: file('absent.json') })).toMatch(/absent\.json: no such file or directory/)
  })
  it('not JSON', async () => {
    expect(await refused({ tokens: file('bad.json', '[1, 2,') })).toMatch(/--tokens .*bad\.json: not valid JSON/)
  })
  it('JSON but not an array', async () => {
    expect(await refused({ tokens: file('object.json', '{"input_ids": [1, 2]}') })).toMatch(/object\.json: expected a JSON array of token ids, found object/)
  })
  it('an entry that is not a non-negative integer (negative, fractional, string, nested)', async () => {
    expect(await refused({ tokens: file('neg.json', '[5, 6, -3]') })).toMatch(/neg\.json: entry 2 is -3, not a non-negative integer token id/)
    expect(await refused({ tokens: file('frac.json', '[5, 1.5]') })).toMatch(/frac\.json: entry 1 is 1\.5/)
    expect(await refused({ tokens: file('str.json', '["7"]') })).toMatch(/str\.json: entry 0 is "7"/)
    expect(await refused({ tokens: file('nested.json', '[[1, 2]]') })).toMatch(/nested\.json: entry 0 is \[1,2\]/)
  })
  it('an empty array', async () => {
    expect(await refused({ tokens: file('empty.json', '[]') })).toMatch(/empty\.json: holds no token ids/)
  })
  it('a token id the model does not have', async () => {
    expect(await refused({ tokens: file('vocab.json', '[3, 4, 5, 512]') })).toMatch(/token 3 is 512, not a token id of this model \(vocab_size 512\)/)
  })
  it('a safetensors file without input_ids, or with input_ids of another dtype', async () => {
    const none = file('none.safetensors')
    await writeSafetensors(none, { ids: tensorFrom('I64', [2], BigInt64Array.of(1n, 2n)) })
    expect(await refused({ tokens: none })).toMatch(/none\.safetensors: has no tensor named "input_ids"/)
    const f32 = file('f32.safetensors')
    await writeSafetensors(f32, { input_ids: tensorFrom('F32', [2], Float32Array.of(1, 2)) })
    expect(await refused({ tokens: f32 })).toMatch(/f32\.safetensors: input_ids is F32 \[2\]; --tokens needs I64 or I32/)
  })
  it('a broken safetensors file', async () => {
    expect(await refused({ tokens: file('broken.safetensors', 'not a safetensors file') })).toMatch(/broken\.safetensors: header length \d+ is absurd/)
  })
})

describe.concurrent('--split must satisfy 0 < N < T', () => {
  it('0, T and past T are out of range', async () => {
    for (const n of ['0', '301', '5000']) {
      expect(await refused({}, '--split', n)).toContain(`--split ${n} is out of range: it must satisfy 0 < N < T = 301 (the tokens in ${TOKENS})`)
    }
  })
  it('a non-integer is refused as such', async () => {
    expect(await refused({}, '--split', '1.5')).toContain('--split must be a non-negative integer, got "1.5"')
    expect(await refused({}, '--split', '1e2')).toContain('--split must be a non-negative integer, got "1e2"')
  })
})

describe.concurrent('an unknown --profile is refused with the known names', () => {
  it('bf16 is not a profile name', async () => {
    expect(await refused({ profile: 'bf16' })).toContain('unknown numerics profile "bf16"; known: f32, hf-bf16, decoder, prefill')
  })
})

describe.concurrent('--greedy must be a non-negative integer that fits the model', () => {
  it('-1, in both option spellings', async () => {
    expect(await refused({}, '--greedy', '-1')).toContain('--greedy must be a non-negative integer, got "-1"')
    expect(await refused({}, '--greedy=-1')).toContain('--greedy must be a non-negative integer, got "-1"')
  })
  it('more tokens than max_position_embeddings allows', async () => {
    expect(await refused({}, '--greedy', '40000')).toContain('301 prompt tokens + 40000 greedy tokens need 40300 positions, more than max_position_embeddings (32768)')
  })
})

describe.concurrent('--out is never overwritten without --force, and its directory must exist', () => {
  it('an existing file is refused and left as it was', async () => {
    const out = file('exists.safetensors', 'keep me')
    expect(await refused({ out })).toContain(`--out ${out}: already exists (pass --force to replace it)`)
    expect(await import('node:fs').then((fs) => fs.readFileSync(out, 'utf8'))).toBe('keep me')
  })
  it('a missing directory', async () => {
    const out = join(scratch.dir, 'no-such-dir', 'x.safetensors')
    expect(await refused({ out })).toContain(`the directory ${join(scratch.dir, 'no-such-dir')} does not exist`)
  })
})

describe.concurrent('a --model that is not a checkpoint is refused', () => {
  it('a directory without config.json', async () => {
    expect(await refused({ model: scratch.dir })).toMatch(/config\.json: config\.json: missing: a checkpoint directory needs a config\.json/)
  })
})

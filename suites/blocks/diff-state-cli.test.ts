// `pd-bridge diff-state` as a real child process: restore from the decoder's blocks, compare every
// array with a native prefill. All bit-exact -> exit 0; a tampered block tensor (its digest stamped
// anew, as a wrong writer would leave it) is named -> exit 1; bad input -> exit 2.
import { execFile } from 'node:child_process'
import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { SafetensorsFile } from '../../src/formats/safetensors/index.ts'
import { flipTensorBit } from '../support/flip-bit.ts'
import { blockPath } from '../../src/decode/store/index.ts'
import { BS, arrayCount, nativePrefill, openPrefixCache, prompt, restampContentDigest, tinyModel, type TinyModel } from './helpers.ts'

const run = promisify(execFile)
const bin = new URL('../../bin/pd-bridge.mjs', import.meta.url).pathname

async function cli (...args: string[]): Promise<{ code: number, stdout: string, stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [bin, ...args])
    return { code: 0, stdout, stderr }
  } catch (err) {
    const e = err as { code: number, stdout: string, stderr: string }
    return { code: e.code, stdout: e.stdout, stderr: e.stderr }
  }
}

let model: TinyModel
let root: string
let tokensFile: string
let hashes: string[]
let arrays: number
const T = prompt(700, 41)

beforeAll(async () => {
  model = await tinyModel()
  root = model.scratch('blocks')
  tokensFile = join(model.scratch('tokens'))
  await writeFile(tokensFile, JSON.stringify(T))
  // The decoder profile is diff-state's default.
  const { pc } = await openPrefixCache(model, root, 'decoder')
  hashes = (await pc.prefillAndStore(model.engine('decoder'), T)).storedBlocks.map((b) => b.hash)
  arrays = arrayCount(nativePrefill(model.engine('f32'), T.slice(0, 2 * BS)).cache)
})
afterAll(async () => await model.cleanup())

const args = () => ['diff-state', '--model', model.dir, '--blocks', root, '--tokens', tokensFile, '--block-size', String(BS)]

describe('a good store', () => {
  it('prints every array as bit-exact and "N/N bit-exact", exit 0', async () => {
    const r = await cli(...args())
    expect(r.stderr).toBe('')
    expect(r.code).toBe(0)
    const lines = r.stdout.trim().split('\n')
    expect(lines[0]).toBe(`restored 2 block(s) = 512 of 700 tokens (profile decoder, block size ${BS}); native prefill of tokens [0, 512)`)
    expect(lines.at(-1)).toBe(`${arrays}/${arrays} bit-exact`)
    expect(lines.slice(1, -1)).toHaveLength(arrays)
    expect(lines).toContain('layers.1.compressor.compressed_kv [128,128]: bit-exact')
    expect(lines).toContain('layers.0.window [127,128]: bit-exact')
    expect(lines).toContain('token_count [1]: bit-exact')
  })
})

describe('a tampered block tensor', () => {
  it('is named, with the array it corrupts, and the command exits 1', async () => {
    // Flip one bit of the first value of block 1's CSA main-pool delta (layer 1, sub-cache 1, pooled rows),
    // then stamp the block's content digest anew: a writer that built a wrong value (the store would
    // refuse and quarantine a flip without a matching digest as bit rot; suites/blocks/integrity.test.ts).
    const path = blockPath(root, hashes[1])
    const f = await SafetensorsFile.open(path)
    const info = f.info('layer_1_sub_1_state_2')
    await f.close()
    expect(info.dtype).toBe('BF16')
    await flipTensorBit(path, 'layer_1_sub_1_state_2')
    await restampContentDigest(path)

    const r = await cli(...args())
    expect(r.code).toBe(1)
    const lines = r.stdout.trim().split('\n')
    // Block 1 holds pooled rows [64, 128) of the ratio-4 pool: its first value is row 64, element 64 * 128.
    expect(lines).toContainEqual(expect.stringMatching(/^layers\.1\.compressor\.compressed_kv \[128,128\]: DIFFERS in 1 of 16384 values, first at element 8192: restored \S+, native \S+ \(restored from block 1 tensor layer_1_sub_1_state_2\)$/))
    expect(lines.at(-1)).toBe(`${arrays - 1}/${arrays} bit-exact`)
  })
})

describe('nothing to compare, and bad input', () => {
  it('blocks of another profile restore nothing: exit 1, 0/0', async () => {
    const r = await cli(...args(), '--profile', 'f32')
    expect(r.code).toBe(1)
    expect(r.stdout).toMatch(/no cache restored from .* for the 700-token prompt: block 0 \([0-9a-f]{64}\) was built under another geometry: .*\n0\/0 bit-exact\n$/)
    expect(r.stderr).toMatch(/refused \(geometry\)/)
  })

  it('exit 2 for a missing token file, a bad block size, a missing store and a bad token file', async () => {
    const missing = await cli('diff-state', '--model', model.dir, '--blocks', root, '--tokens', join(root, 'nope.json'))
    expect(missing.code).toBe(2)
    expect(missing.stderr).toMatch(/nope\.json: no such file or directory/)
    const size = await cli(...args(), '--block-size', '0')
    expect(size.code).toBe(2)
    expect(size.stderr).toMatch(/--block-size: "0" is not a positive integer/)
    const store = await cli('diff-state', '--model', model.dir, '--blocks', join(root, 'absent'), '--tokens', tokensFile)
    expect(store.code).toBe(2)
    expect(store.stderr).toMatch(/--blocks .*absent: no such directory/)
    const bad = model.scratch('bad-tokens')
    await writeFile(bad, '1 2 x3')
    const text = await cli('diff-state', '--model', model.dir, '--blocks', root, '--tokens', bad)
    expect(text.code).toBe(2)
    expect(text.stderr).toMatch(/token 2 is "x3", not a non-negative integer token id/)
  })
})

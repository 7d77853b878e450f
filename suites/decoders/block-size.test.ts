// The one block size rule (src/config/block-size.ts): its parse of a flag's text, its pool-ratio
// check, and the entry points that use it: the decoder's prefix cache (which once took any positive
// integer), the front door config's default, the embedded defaults.
import { mkdtempSync, rmSync, existsSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { checkBlockSize, DEFAULT_BLOCK_SIZE, parseBlockSize } from '../../src/config/block-size.ts'
import { parseFrontConfig } from '../../src/config/index.ts'
import { DecoderPrefixCache } from '../../src/decode/prefix-cache/index.ts'
import { DECODER_DEFAULTS } from '../../src/engines/decoder/launch.ts'
import { ConfigError } from '../../src/errors.ts'
import { presetConfig } from '../../src/model/checkpoint/index.ts'
import { EMBEDDED_DEFAULTS } from '../../src/stack/embedded.ts'

const dir = mkdtempSync(join(tmpdir(), 'pd-bridge-block-size-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe('parseBlockSize', () => {
  it('takes decimal digits of a positive safe integer, and names the flag otherwise', () => {
    expect(parseBlockSize('256')).toBe(256)
    expect(parseBlockSize('1')).toBe(1)
    for (const text of ['0', '-1', '1.5', '1e3', '0x10', ' 5', '5 ', '', 'abc', '99999999999999999']) {
      expect(() => parseBlockSize(text, '--block-size'), text).toThrow(ConfigError)
      expect(() => parseBlockSize(text, '--block-size'), text).toThrow(`--block-size: ${JSON.stringify(text)} is not a positive integer`)
    }
  })
})

describe('checkBlockSize', () => {
  it('a multiple of every pool ratio passes; another size names the ratio that does not divide it', () => {
    const ratios = presetConfig('tiny').compressRatios
    const largest = Math.max(...ratios)
    expect(largest).toBeGreaterThan(1)
    expect(checkBlockSize(2 * largest, ratios)).toBe(2 * largest)
    expect(() => checkBlockSize(largest / 2, ratios, '--block-size', 'tiny')).toThrow(`--block-size: ${largest / 2} must be a multiple of every pool ratio of tiny`)
    expect(() => checkBlockSize(largest + 4, ratios)).toThrow(`${largest} does not divide it`)
    expect(() => checkBlockSize(0, [])).toThrow('must be a positive integer')
    expect(() => checkBlockSize(1.5, [])).toThrow('must be a positive integer')
    expect(checkBlockSize(3, [0, 1])).toBe(3)
  })

  it('every default obeys it for the preset it serves', () => {
    expect(checkBlockSize(EMBEDDED_DEFAULTS.blockSize, presetConfig(EMBEDDED_DEFAULTS.preset).compressRatios)).toBe(EMBEDDED_DEFAULTS.blockSize)
    expect(DECODER_DEFAULTS.blockSize).toBe(DEFAULT_BLOCK_SIZE)
    expect(parseFrontConfig({ decoder: { url: 'http://127.0.0.1:1' } }).config.decoder.blockSize).toBe(DEFAULT_BLOCK_SIZE)
  })
})

describe('the decoder\'s prefix cache uses the rule', () => {
  it('refuses a block size that is not a positive integer before it touches the store', async () => {
    const cfg = presetConfig('tiny')
    const root = join(dir, 'store')
    for (const blockSize of [0, -256, 1.5]) {
      await expect(DecoderPrefixCache.open({ storeRoot: root, modelName: 'tiny', cfg, profile: 'f32', blockSize })).rejects.toThrow(`block size: must be a positive integer, got ${blockSize}`)
    }
    expect(existsSync(root)).toBe(false)
  })

  it('takes a size that is not a multiple of a pool ratio: its own store keeps the buffered rows (blocks/mapping proves the restore)', async () => {
    const cfg = presetConfig('tiny')
    const largest = Math.max(...cfg.compressRatios)
    const cache = await DecoderPrefixCache.open({ storeRoot: join(dir, 'odd-store'), modelName: 'tiny', cfg, profile: 'f32', blockSize: largest / 2 })
    expect(cache.blockSize).toBe(largest / 2)
  })
})

// What the whole-file writers refuse, and what they keep exactly (NaN payloads, odd keys).
import { describe, it, expect, beforeAll, afterAll } from 'vitest'
import { readdir } from 'node:fs/promises'
import { join } from 'node:path'
import { SafetensorsError } from '../../src/errors.ts'
import { readSafetensors, serializeSafetensors, tensorFrom, writeSafetensors, type Tensor } from '../../src/formats/safetensors/index.ts'
import { tempDir } from './helpers.ts'

let dir: string
let cleanup: () => Promise<void>
beforeAll(async () => ({ dir, cleanup } = await tempDir()))
afterAll(async () => await cleanup())

const ok = tensorFrom('U8', [2], Uint8Array.of(1, 2))

describe('writers refuse tensors that would not read back as given', () => {
  const cases: [string, Record<string, Tensor>, string][] = [
    ['short data', { t: { dtype: 'F32', shape: [2], data: new Uint8Array(7) } }, 'tensor "t": data is 7 bytes, its dtype and shape need 8'],
    ['data not bytes', { t: { dtype: 'F32', shape: [1], data: new Float32Array(1) as unknown as Uint8Array } }, 'tensor "t": data must be a Uint8Array'],
    ['unknown dtype', { t: { dtype: 'Q8' as Tensor['dtype'], shape: [1], data: new Uint8Array(1) } }, 'tensor "t": unknown dtype "Q8"'],
    ['negative dim', { t: { dtype: 'U8', shape: [-2], data: new Uint8Array(0) } }, 'tensor "t": shape must be a list of non-negative safe integers'],
    ['reserved name', { __metadata__: ok }, 'tensor "__metadata__": the name is reserved for metadata'],
    ['lone surrogate name', { ['\uD800']: ok }, 'tensor "\\ud800": name holds a lone surrogate (not valid UTF-8)'],
    ['not a tensor', { t: null as unknown as Tensor }, 'tensor "t": not a tensor object'],
  ]
  it.each(cases)('%s', async (_, tensors, message) => {
    expect(() => serializeSafetensors(tensors)).toThrow(`<in-memory safetensors>: ${message}`)
    const path = join(dir, 'refused.safetensors')
    await expect(writeSafetensors(path, tensors)).rejects.toThrow(`${path}: ${message}`)
    expect(await readdir(dir)).not.toContain('refused.safetensors')
  })

  it('refuses metadata that is not string -> string', async () => {
    expect(() => serializeSafetensors({ t: ok }, { n: 1 } as unknown as Record<string, string>)).toThrow('metadata "n" must be a string, got number')
    expect(() => serializeSafetensors({ t: ok }, [] as unknown as Record<string, string>)).toThrow('metadata must be a string->string object')
    expect(() => serializeSafetensors({ t: ok }, { k: '\uDC00' })).toThrow(SafetensorsError)
  })
})

describe('values are bytes: NaN payloads, -0 and Inf survive bit for bit', () => {
  it('round trips special float bit patterns unchanged', async () => {
    const bits = Uint32Array.of(0x7fa00001, 0xffc00000, 0x80000000, 0x7f800000, 0xff800000, 0x00000001)
    const path = join(dir, 'nan.safetensors')
    await writeSafetensors(path, { x: tensorFrom('F32', [6], new Uint8Array(bits.buffer)) })
    const back = (await readSafetensors(path)).tensors.get('x')!
    expect(new Uint32Array(back.data.buffer, back.data.byteOffset, 6)).toEqual(bits)
  })
})

describe('odd but legal names and metadata keys round trip', () => {
  it('keeps "__proto__", "", "constructor" and astral names as own keys', async () => {
    const tensors = new Map<string, Tensor>([['__proto__', ok], ['', ok], ['constructor', ok], ['\u{1F600}', ok]])
    const metadata: Record<string, string> = {}
    Object.defineProperty(metadata, '__proto__', { value: 'p', enumerable: true })
    metadata[''] = 'empty'
    const path = join(dir, 'odd.safetensors')
    await writeSafetensors(path, tensors, metadata)
    const back = await readSafetensors(path)
    expect([...back.tensors.keys()].sort()).toEqual(['', '__proto__', 'constructor', '\u{1F600}'])
    expect(Object.keys(back.metadata).sort()).toEqual(['', '__proto__'])
    expect(Object.getOwnPropertyDescriptor(back.metadata, '__proto__')?.value).toBe('p')
  })
})

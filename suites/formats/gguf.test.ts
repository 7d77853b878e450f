// GGUF: the writer's bytes against a file laid out by hand from the format's definition (magic,
// version, counts, length-prefixed strings, typed values, tensor infos, aligned data), round trips
// of every value and tensor type, and a reader that answers every truncated or mutated file with a
// GgufError (fast-check, fixed seed), never another exception; the streaming file writer and the
// header-only reader (a prefix of the file, grown as the header needs) against them.
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { GgufError, parseGguf, parseGgufHeader, readGgufHeader, serializeGguf, writeGgufFile, type GgufTensor, type GgufValue } from '../../src/formats/gguf/index.ts'

function le (...parts: Array<[string, number | bigint]>): number[] {
  const out: number[] = []
  for (const [kind, v] of parts) {
    const b = new DataView(new ArrayBuffer(8))
    if (kind === 'u32') { b.setUint32(0, Number(v), true); out.push(...new Uint8Array(b.buffer, 0, 4)) }
    else if (kind === 'u64') { b.setBigUint64(0, BigInt(v), true); out.push(...new Uint8Array(b.buffer, 0, 8)) }
    else if (kind === 'f32') { b.setFloat32(0, Number(v), true); out.push(...new Uint8Array(b.buffer, 0, 4)) }
  }
  return out
}
const str = (s: string) => [...le(['u64', s.length]), ...Buffer.from(s, 'utf8')]

describe('the writer lays a file out as the format defines', () => {
  it('one UINT32 key, one F32 [3] tensor: byte for byte as written by hand', () => {
    const bytes = serializeGguf({
      metadata: [['deepseek4.block_count', { type: 'UINT32', value: 43 }]],
      tensors: [{ name: 'x', type: 'F32', dims: [3], data: new Uint8Array(Float32Array.of(1, 2, 3).buffer) }],
    })
    const header = [
      ...Buffer.from('GGUF'), ...le(['u32', 3], ['u64', 1], ['u64', 1]),
      ...str('deepseek4.block_count'), ...le(['u32', 4], ['u32', 43]),
      ...str('x'), ...le(['u32', 1], ['u64', 3], ['u32', 0], ['u64', 0]),
    ]
    const pad = (n: number) => new Array((32 - (n % 32)) % 32).fill(0)
    const data = le(['f32', 1], ['f32', 2], ['f32', 3])
    expect(Array.from(bytes)).toEqual([...header, ...pad(header.length), ...data, ...pad(data.length)])
  })

  it('every tensor starts at a multiple of the alignment, also a custom one named in general.alignment', () => {
    const tensors: GgufTensor[] = [
      { name: 'a', type: 'F16', dims: [5], data: new Uint8Array(10) },
      { name: 'b', type: 'I8', dims: [3, 1], data: new Uint8Array(3) },
      { name: 'c', type: 'BF16', dims: [7, 2], data: new Uint8Array(28) },
    ]
    const bytes = serializeGguf({ metadata: [['general.alignment', { type: 'UINT32', value: 64 }]], tensors, alignment: 64 })
    const back = parseGguf(bytes)
    expect(back.alignment).toBe(64)
    expect(back.tensors.map((t) => [t.name, t.type, t.dims, t.data.length])).toEqual(tensors.map((t) => [t.name, t.type, t.dims, t.data.length]))
    expect(bytes.length % 64).toBe(0)
  })
})

describe('round trips', () => {
  it('every scalar and array value type', () => {
    const metadata: Array<[string, GgufValue]> = [
      ['u8', { type: 'UINT8', value: 255 }], ['i8', { type: 'INT8', value: -128 }],
      ['u16', { type: 'UINT16', value: 65535 }], ['i16', { type: 'INT16', value: -32768 }],
      ['u32', { type: 'UINT32', value: 4294967295 }], ['i32', { type: 'INT32', value: -2147483648 }],
      ['f32', { type: 'FLOAT32', value: Math.fround(0.1) }], ['f64', { type: 'FLOAT64', value: 0.1 }],
      ['u64', { type: 'UINT64', value: (1n << 64n) - 1n }], ['i64', { type: 'INT64', value: -(1n << 63n) }],
      ['bool', { type: 'BOOL', value: true }], ['s', { type: 'STRING', value: 'Ünïcödé ▁ 你好' }],
      ['ai32', { type: 'ARRAY', itemType: 'INT32', value: [0, 4, 128, 4] }],
      ['as', { type: 'ARRAY', itemType: 'STRING', value: ['<｜begin▁of▁sentence｜>', '', 'a'] }],
      ['af32', { type: 'ARRAY', itemType: 'FLOAT32', value: [0, -1.5] }],
      ['ab', { type: 'ARRAY', itemType: 'BOOL', value: [true, false] }],
      ['ai64', { type: 'ARRAY', itemType: 'INT64', value: [1n, -2n] }],
    ]
    const back = parseGguf(serializeGguf({ metadata, tensors: [] }))
    expect([...back.metadata]).toEqual(metadata)
  })

  it('tensors of every handled type keep their bytes and dims', () => {
    fc.assert(fc.property(
      fc.constantFrom('F32', 'F16', 'BF16', 'I8', 'I16', 'I32', 'I64', 'F64' as const),
      fc.array(fc.integer({ min: 1, max: 5 }), { minLength: 1, maxLength: 4 }),
      fc.integer({ min: 0, max: 255 }),
      (type, dims, fill) => {
        const size = { F32: 4, F16: 2, BF16: 2, I8: 1, I16: 2, I32: 4, I64: 8, F64: 8 }[type] * dims.reduce((a, b) => a * b, 1)
        const data = Uint8Array.from({ length: size }, (_, i) => (i * 31 + fill) & 0xff)
        const back = parseGguf(serializeGguf({ metadata: [], tensors: [{ name: 't', type, dims, data }] }))
        expect(back.tensors[0]).toEqual({ name: 't', type, dims, data })
      },
    ), { seed: 1, numRuns: 200 })
  })
})

describe('bad input to the writer is refused, naming it', () => {
  const t = (over: Partial<GgufTensor>): GgufTensor => ({ name: 'w', type: 'F32', dims: [2], data: new Uint8Array(8), ...over })
  it.each([
    [{ tensors: [t({ data: new Uint8Array(4) })] }, 'tensor w: F32 [2] needs 8 bytes of data, got 4'],
    [{ tensors: [t({}), t({})] }, 'tensor w: given twice'],
    [{ tensors: [t({ name: 'x'.repeat(64) })] }, 'a name is 1 to 63 bytes of UTF-8, this one is 64'],
    [{ tensors: [t({ dims: [1, 1, 1, 1, 2] })] }, 'dims [1, 1, 1, 1, 2] must be 1 to 4 positive integers'],
    [{ metadata: [['k', { type: 'UINT8', value: 256 }]] }, 'metadata k: 256 is not a UINT8'],
    [{ metadata: [['k', { type: 'UINT32', value: 1 }], ['k', { type: 'UINT32', value: 1 }]] }, 'metadata k: given twice'],
    [{ metadata: [['general.alignment', { type: 'UINT32', value: 16 }]] }, 'must be the UINT32 32 the data is aligned to'],
  ] as const)('%#', (o, message) => {
    expect(() => serializeGguf({ metadata: [], tensors: [], ...o } as never)).toThrow(GgufError)
    expect(() => serializeGguf({ metadata: [], tensors: [], ...o } as never)).toThrow(message)
  })
})

describe('the reader refuses broken files with a GgufError, never another exception', () => {
  const good = serializeGguf({
    metadata: [['general.architecture', { type: 'STRING', value: 'deepseek4' }], ['deepseek4.attention.compress_ratios', { type: 'ARRAY', itemType: 'INT32', value: [0, 4, 128, 4] }]],
    tensors: [{ name: 'token_embd.weight', type: 'F32', dims: [4, 3], data: new Uint8Array(48) }, { name: 'output_norm.weight', type: 'F32', dims: [4], data: new Uint8Array(16) }],
  })

  it('every truncation of a good file that cuts into a tensor or the header', () => {
    // The last tensor (16 bytes) is followed by 16 bytes of padding: cutting only those keeps every tensor.
    const lastTensorEnd = good.length - 16
    for (let n = 0; n < lastTensorEnd; n++) {
      expect(() => parseGguf(good.subarray(0, n)), `truncated to ${n} bytes`).toThrow(GgufError)
    }
    expect(parseGguf(good.subarray(0, lastTensorEnd)).tensors).toHaveLength(2)
  })

  it('named problems: magic, version, value type, tensor type, misaligned offset', () => {
    const mutate = (at: number, value: number) => { const b = good.slice(); new DataView(b.buffer).setUint32(at, value, true); return b }
    expect(() => parseGguf(mutate(0, 0x12345678))).toThrow('not a GGUF file')
    expect(() => parseGguf(mutate(4, 1))).toThrow('GGUF version 1 is not read here')
    const keyEnd = 24 + 8 + 'general.architecture'.length
    expect(() => parseGguf(mutate(keyEnd, 99))).toThrow('is 99, not a GGUF value type')
  })

  it('random byte mutations (fast-check, seed 7, 2,000 cases) give a GgufError or a file, nothing else', () => {
    let parsed = 0
    fc.assert(fc.property(fc.array(fc.tuple(fc.nat({ max: good.length - 1 }), fc.nat({ max: 255 })), { minLength: 1, maxLength: 6 }), (edits) => {
      const b = good.slice()
      for (const [at, v] of edits) b[at] = v
      try { parseGguf(b); parsed++ } catch (e) { if (!(e instanceof GgufError)) throw e }
    }), { seed: 7, numRuns: 2000 })
    console.log(`gguf reader fuzz: 2000 mutated files, ${parsed} still parsed, the rest refused with a GgufError`)
  })
})

describe('streaming writer and header reader', () => {
  const tensors: GgufTensor[] = [
    { name: 'token_embd.weight', type: 'F32', dims: [4, 3], data: new Uint8Array(Float32Array.from({ length: 12 }, (_, i) => i / 7).buffer) },
    { name: 'blk.0.ffn_gate_tid2eid.weight', type: 'I32', dims: [2, 3], data: new Uint8Array(Int32Array.of(0, 1, 2, 3, 1, 0).buffer) },
    { name: 'blk.0.attn_q_a.weight', type: 'BF16', dims: [5], data: new Uint8Array(10).fill(7) },
  ]
  const metadata: Array<[string, GgufValue]> = [
    ['general.architecture', { type: 'STRING', value: 'deepseek4' }],
    ['deepseek4.attention.compress_ratios', { type: 'ARRAY', itemType: 'UINT32', value: [0, 4, 128, 4] }],
  ]
  let dir: string
  beforeAll(() => { dir = mkdtempSync(join(tmpdir(), 'pd-bridge-gguf-')) })
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it('writeGgufFile writes the bytes serializeGguf makes, calling lazy data once each, in order', async () => {
    const calls: string[] = []
    const lazy = tensors.map((t) => ({ ...t, data: () => { calls.push(t.name); return t.data } }))
    const path = join(dir, 'a.gguf')
    const size = await writeGgufFile(path, { metadata, tensors: lazy })
    const expected = serializeGguf({ metadata, tensors })
    expect(Buffer.compare(readFileSync(path), Buffer.from(expected))).toBe(0)
    expect(size).toBe(expected.length)
    expect(calls).toEqual(tensors.map((t) => t.name))
    expect(readdirSync(dir)).toEqual(['a.gguf'])
  })

  it('lazy data of the wrong size: a GgufError naming the tensor, and no file (not even the temporary one)', async () => {
    const bad = tensors.map((t, i) => i === 1 ? { ...t, data: () => new Uint8Array(4) } : t)
    const path = join(dir, 'bad.gguf')
    await expect(writeGgufFile(path, { metadata, tensors: bad })).rejects.toThrow('tensor blk.0.ffn_gate_tid2eid.weight: I32 [2, 3] needs 24 bytes of data, got 4')
    expect(readdirSync(dir).filter((f) => f.startsWith('bad'))).toEqual([])
  })

  it('readGgufHeader = parseGguf without the data: the same metadata and tensor table, absolute data offsets', async () => {
    const path = join(dir, 'h.gguf')
    const bytes = serializeGguf({ metadata, tensors })
    writeFileSync(path, bytes)
    const h = await readGgufHeader(path)
    const whole = parseGguf(bytes)
    expect([...h.metadata]).toEqual([...whole.metadata])
    expect(h.tensors.map((t) => [t.name, t.type, t.dims])).toEqual(whole.tensors.map((t) => [t.name, t.type, t.dims]))
    for (const [i, t] of h.tensors.entries()) expect(Buffer.compare(Buffer.from(bytes.subarray(t.start, t.start + t.bytes)), Buffer.from(tensors[i].data))).toBe(0)
    expect(h.fileSize).toBe(bytes.length)
    expect(h.dataStart % 32).toBe(0)
  })

  it('a header larger than the first read (several MiB of strings) is read by growing the prefix', async () => {
    const big: Array<[string, GgufValue]> = [...metadata, ['tokenizer.ggml.tokens', { type: 'ARRAY', itemType: 'STRING', value: Array.from({ length: 200_000 }, (_, i) => `token-${i}-${'x'.repeat(i % 13)}`) }]]
    const path = join(dir, 'big.gguf')
    writeFileSync(path, serializeGguf({ metadata: big, tensors }))
    const h = await readGgufHeader(path)
    expect(h.dataStart).toBeGreaterThan(4 << 20)
    expect((h.metadata.get('tokenizer.ggml.tokens')!.value as string[])[199_999]).toBe(`token-199999-${'x'.repeat(199_999 % 13)}`)
    expect(h.tensors).toHaveLength(3)
  })

  it('parseGgufHeader on every prefix of a good file: null (read more) or the header, never a wrong answer', () => {
    const bytes = serializeGguf({ metadata, tensors })
    const full = parseGgufHeader(bytes)!
    for (let n = 0; n < bytes.length; n++) {
      const h = parseGgufHeader(bytes.subarray(0, n), bytes.length)
      if (h !== null) expect(h).toEqual(full)
    }
  })

  it('a truncated file through readGgufHeader: a GgufError naming the path', async () => {
    const path = join(dir, 'cut.gguf')
    writeFileSync(path, serializeGguf({ metadata, tensors }).subarray(0, 100))
    await expect(readGgufHeader(path)).rejects.toThrow(GgufError)
    await expect(readGgufHeader(path)).rejects.toThrow(`${path}: byte`)
  })

  it('parseGguf copies tensor data out of a Buffer (Buffer.prototype.slice would share it)', () => {
    const file = Buffer.from(serializeGguf({ metadata, tensors }))
    for (const t of parseGguf(file).tensors) {
      expect(t.data.byteOffset).toBe(0)
      expect(t.data.buffer.byteLength).toBe(t.data.length)
    }
  })
})

// The streaming writer: strict order and sizes, and nothing under the final name until close succeeds.
import { describe, it, expect, beforeEach, afterEach } from 'vitest'
import { access, readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { SafetensorsError } from '../../src/errors.ts'
import {
  SafetensorsStreamWriter, readSafetensors, referenceOrder, serializeSafetensors, tensorFrom, type Dtype,
} from '../../src/formats/safetensors/index.ts'
import { sameBytes, tempDir } from './helpers.ts'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({ dir, cleanup } = await tempDir()))
afterEach(async () => await cleanup())

const layout: { name: string, dtype: Dtype, shape: number[] }[] = [
  { name: 'w', dtype: 'BF16', shape: [2, 2] },
  { name: 'bias', dtype: 'F32', shape: [2] },
  { name: 'ids', dtype: 'I64', shape: [] },
]
const bytes = (n: number, seed: number): Uint8Array => Uint8Array.from({ length: n }, (_, i) => (i * 7 + seed) & 0xff)
const exists = async (p: string): Promise<boolean> => await access(p).then(() => true, () => false)

describe('writes tensors in the given layout order', () => {
  it('produces a file whose tensors read back, laid out in layout order', async () => {
    const path = join(dir, 'a.safetensors')
    const w = await SafetensorsStreamWriter.create(path, layout, { format: 'pt' })
    expect(w.order).toEqual(['w', 'bias', 'ids'])
    await w.write('w', bytes(8, 1))
    await w.write('bias', bytes(8, 2))
    await w.write('ids', bytes(8, 3))
    await w.close()
    const back = await readSafetensors(path)
    expect([...back.tensors.keys()]).toEqual(['w', 'bias', 'ids'])
    expect(sameBytes(back.tensors.get('bias')!.data, bytes(8, 2))).toBe(true)
    expect(back.metadata).toEqual({ format: 'pt' })
  })

  it('with referenceOrder(layout) gives exactly the serializeSafetensors bytes', async () => {
    const path = join(dir, 'b.safetensors')
    const ordered = referenceOrder(layout)
    const data = new Map(layout.map((e, i) => [e.name, bytes(8, i)]))
    const w = await SafetensorsStreamWriter.create(path, ordered)
    for (const e of ordered) await w.write(e.name, data.get(e.name)!)
    await w.close()
    const inMemory = serializeSafetensors(new Map(layout.map(e => [e.name, tensorFrom(e.dtype, e.shape, data.get(e.name)!)])))
    expect(sameBytes(await readFile(path), inMemory)).toBe(true)
  })
})

describe('refuses an out-of-order write', () => {
  it('names the expected tensor and keeps the writer usable', async () => {
    const path = join(dir, 'c.safetensors')
    const w = await SafetensorsStreamWriter.create(path, layout)
    await expect(w.write('bias', bytes(8, 0))).rejects.toThrow(`${path}: cannot write tensor "bias": out of order; expected "w" next`)
    await w.write('w', bytes(8, 0))
    await expect(w.write('w', bytes(8, 0))).rejects.toThrow('cannot write tensor "w": it was already written; expected "bias" next')
    await expect(w.write('nope', bytes(8, 0))).rejects.toThrow('cannot write tensor "nope": it is not in the layout')
    await w.write('bias', bytes(8, 0))
    await w.write('ids', bytes(8, 0))
    await w.close()
    expect(await exists(path)).toBe(true)
  })
})

describe('refuses a wrong byte count', () => {
  it('rejects too few and too many bytes without writing them', async () => {
    const path = join(dir, 'd.safetensors')
    const w = await SafetensorsStreamWriter.create(path, layout)
    await expect(w.write('w', bytes(7, 0))).rejects.toThrow(`${path}: tensor "w": data is 7 bytes, its dtype and shape need 8`)
    await expect(w.write('w', bytes(9, 0))).rejects.toThrow('data is 9 bytes, its dtype and shape need 8')
    await w.write('w', bytes(8, 5))
    await w.write('bias', bytes(8, 6))
    await w.write('ids', bytes(8, 7))
    await w.close()
    expect(sameBytes((await readSafetensors(path)).tensors.get('w')!.data, bytes(8, 5))).toBe(true)
  })
})

describe('refuses to close an unfinished file', () => {
  it('names the missing tensors, leaves nothing under the final name and no temporary file', async () => {
    const path = join(dir, 'e.safetensors')
    const w = await SafetensorsStreamWriter.create(path, layout)
    await w.write('w', bytes(8, 0))
    await expect(w.close()).rejects.toThrow(`${path}: cannot close: 2 tensor(s) never written ("bias", "ids"); no file was created`)
    expect(await readdir(dir)).toEqual([])
    await expect(w.write('bias', bytes(8, 0))).rejects.toThrow('writer is failed')
  })
})

describe('never shows a partial file under the final name', () => {
  it('keeps the final path absent while writing and uses a name that does not match *.safetensors', async () => {
    const path = join(dir, 'f.safetensors')
    const w = await SafetensorsStreamWriter.create(path, layout)
    await w.write('w', bytes(8, 0))
    expect(await exists(path)).toBe(false)
    const during = await readdir(dir)
    expect(during).toHaveLength(1)
    expect(during[0].startsWith('f.safetensors.partial-')).toBe(true)
    expect(during[0].endsWith('.safetensors')).toBe(false)
    await w.write('bias', bytes(8, 0))
    await w.write('ids', bytes(8, 0))
    await w.close()
    expect(await readdir(dir)).toEqual(['f.safetensors'])
  })

  it('abort() removes the temporary file', async () => {
    const w = await SafetensorsStreamWriter.create(join(dir, 'g.safetensors'), layout)
    await w.write('w', bytes(8, 0))
    await w.abort()
    expect(await readdir(dir)).toEqual([])
  })

  it('replaces an existing file only on a successful close', async () => {
    const path = join(dir, 'h.safetensors')
    const first = await SafetensorsStreamWriter.create(path, [{ name: 'x', dtype: 'U8', shape: [1] }])
    await first.write('x', Uint8Array.of(42))
    await first.close()
    const before = await readFile(path)
    const second = await SafetensorsStreamWriter.create(path, layout)
    await second.write('w', bytes(8, 0))
    await expect(second.close()).rejects.toThrow(SafetensorsError)
    expect(sameBytes(await readFile(path), before)).toBe(true)
  })
})

describe('refuses a bad layout up front', () => {
  it('rejects duplicate names, unknown dtypes, bad shapes and sub-byte sizes before creating anything', async () => {
    const path = join(dir, 'i.safetensors')
    await expect(SafetensorsStreamWriter.create(path, [...layout, layout[0]])).rejects.toThrow('tensor "w" appears twice in the layout')
    await expect(SafetensorsStreamWriter.create(path, [{ name: 'x', dtype: 'F128' as Dtype, shape: [1] }])).rejects.toThrow('tensor "x": unknown dtype "F128"')
    await expect(SafetensorsStreamWriter.create(path, [{ name: 'x', dtype: 'F32', shape: [-1] }])).rejects.toThrow('tensor "x": shape must be a list of non-negative safe integers')
    await expect(SafetensorsStreamWriter.create(path, [{ name: 'x', dtype: 'F4', shape: [3] }])).rejects.toThrow('F4 shape [3] holds 12 bits')
    await expect(SafetensorsStreamWriter.create(path, [{ name: '__metadata__', dtype: 'U8', shape: [1] }])).rejects.toThrow('the name is reserved')
    expect(await readdir(dir)).toEqual([])
  })
})

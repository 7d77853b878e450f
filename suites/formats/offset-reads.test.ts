// Random access: open reads only the length and header; read(name) reads only that tensor's bytes.
import { describe, it, expect, beforeAll, afterAll, vi } from 'vitest'
import { open, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { SafetensorsError } from '../../src/errors.ts'
import { SafetensorsFile, tensorFrom, viewAs, writeSafetensors } from '../../src/formats/safetensors/index.ts'
import { readAt } from '../../src/formats/safetensors/positional-io.ts'
import { tempDir } from './helpers.ts'

let dir: string
let cleanup: () => Promise<void>
let path: string
const a = Float32Array.from({ length: 1000 }, (_, i) => i / 8)
const b = Uint8Array.from({ length: 333 }, (_, i) => (i * 31) & 0xff)
const c = BigInt64Array.from({ length: 50 }, (_, i) => BigInt(i) * -3n)

beforeAll(async () => {
  ({ dir, cleanup } = await tempDir())
  path = join(dir, 'three.safetensors')
  await writeSafetensors(path, { a: tensorFrom('F32', [10, 100], a), b: tensorFrom('U8', [333], b), c: tensorFrom('I64', [50], c) })
})
afterAll(async () => await cleanup())

/** Record every FileHandle.read as [position, length] while `fn` runs. */
async function recordReads (fn: () => Promise<void>): Promise<[number, number][]> {
  const probe = await open(path, 'r')
  const proto = Object.getPrototypeOf(probe) as { read: (...args: unknown[]) => Promise<unknown> }
  await probe.close()
  const spy = vi.spyOn(proto, 'read')
  try {
    await fn()
    return spy.mock.calls.map(args => [args[3] as number, args[2] as number])
  } finally {
    spy.mockRestore()
  }
}

describe('open reads the 8-byte length and the header, nothing else', () => {
  it('issues exactly two reads: [0, 8) and [8, dataStart)', async () => {
    let file: SafetensorsFile | undefined
    const reads = await recordReads(async () => { file = await SafetensorsFile.open(path) })
    expect(reads).toEqual([[0, 8], [8, file!.dataStart - 8]])
    expect(file!.dataStart).toBeLessThan((await stat(path)).size - 4000)
    await file!.close()
  })
})

describe('read(name) reads exactly that tensor\'s bytes at its offset', () => {
  it('reads [dataStart + begin, dataStart + end) for each tensor, and the values come back', async () => {
    const file = await SafetensorsFile.open(path)
    try {
      for (const name of ['b', 'a', 'c']) {
        const info = file.tensors.get(name)!
        let t: Awaited<ReturnType<SafetensorsFile['read']>> | undefined
        const reads = await recordReads(async () => { t = await file.read(name) })
        expect(reads).toEqual([[file.dataStart + info.begin, info.end - info.begin]])
        expect(t!.data.byteLength).toBe(info.end - info.begin)
      }
      expect(viewAs(await file.read('a'), 'F32')).toEqual(a)
      expect(viewAs(await file.read('b'), 'U8')).toEqual(b)
      expect(viewAs(await file.read('c'), 'I64')).toEqual(c)
    } finally {
      await file.close()
    }
  })

  it('readRange reads only the asked slice of a tensor', async () => {
    const file = await SafetensorsFile.open(path)
    try {
      const info = file.tensors.get('a')!
      let bytes: Uint8Array | undefined
      const reads = await recordReads(async () => { bytes = await file.readRange('a', 400, 800) })
      expect(reads).toEqual([[file.dataStart + info.begin + 400, 400]])
      expect(new Float32Array(bytes!.buffer)).toEqual(a.subarray(100, 200))
      await expect(file.readRange('a', 0, 4001)).rejects.toThrow('tensor "a": byte range [0,4001) is outside its 4000 bytes')
    } finally {
      await file.close()
    }
  })

  it('reads from disk at read time: bytes changed after open show up in that tensor only', async () => {
    const copy = join(dir, 'copy.safetensors')
    await writeSafetensors(copy, { a: tensorFrom('F32', [10, 100], a), b: tensorFrom('U8', [333], b) })
    const file = await SafetensorsFile.open(copy)
    try {
      const info = file.tensors.get('a')!
      const fh = await open(copy, 'r+')
      await fh.write(new Uint8Array(4000).fill(0xff), 0, 4000, file.dataStart + info.begin)
      await fh.close()
      expect(viewAs(await file.read('b'), 'U8')).toEqual(b)
      expect((await file.read('a')).data.every(x => x === 0xff)).toBe(true)
    } finally {
      await file.close()
    }
  })
})

describe('unknown names and closed files', () => {
  it('read of an unknown name is a SafetensorsError naming file and tensor', async () => {
    const file = await SafetensorsFile.open(path)
    await expect(file.read('zz')).rejects.toThrow(`${path}: no tensor named "zz"`)
    await file.close()
    await expect(file.read('a')).rejects.toThrow(SafetensorsError)
    await file.close()
  })
  it('open of a missing file is a SafetensorsError', async () => {
    await expect(SafetensorsFile.open(join(dir, 'absent.safetensors'))).rejects.toThrow(`${join(dir, 'absent.safetensors')}: cannot open`)
  })
})

describe('readAt loops over short reads and stops at end of file', () => {
  /** A stand-in handle over `bytes` that returns at most 3 bytes per call, as a slow pipe might. */
  const fakeHandle = (bytes: Uint8Array): Parameters<typeof readAt>[0] => ({
    read: async (buf: Uint8Array, off: number, len: number, pos: number) => {
      const n = Math.max(0, Math.min(len, 3, bytes.length - pos))
      buf.set(bytes.subarray(pos, pos + n), off)
      return { bytesRead: n, buffer: buf }
    },
  }) as unknown as Parameters<typeof readAt>[0]

  it('fills the whole target from many short reads', async () => {
    const src = Uint8Array.from({ length: 100 }, (_, i) => i)
    const target = new Uint8Array(40)
    expect(await readAt(fakeHandle(src), target, 50)).toBe(40)
    expect(target).toEqual(src.subarray(50, 90))
  })
  it('reports a short count when the file ends first', async () => {
    expect(await readAt(fakeHandle(new Uint8Array(10)), new Uint8Array(8), 5)).toBe(5)
  })
})

// Property tests: whatever goes in comes back out, and the bytes are stable and in reference layout.
import { describe, it, expect, beforeAll, afterAll } from 'vitest'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import fc from 'fast-check'
import {
  SafetensorsFile, compareReferenceOrder, readSafetensors, serializeSafetensors, writeSafetensors,
} from '../../src/formats/safetensors/index.ts'
import { comparable, metadataArb, sameBytes, tempDir, tensorMapArb } from './helpers.ts'

let dir: string
let cleanup: () => Promise<void>
let counter = 0
beforeAll(async () => ({ dir, cleanup } = await tempDir()))
afterAll(async () => await cleanup())
const nextPath = (): string => join(dir, `t${counter++}.safetensors`)

describe('write -> read gives back the same tensors and metadata', () => {
  it('holds for random dtypes, shapes (0 dims, scalars), bytes and metadata', async () => {
    await fc.assert(fc.asyncProperty(tensorMapArb, metadataArb, async (tensors, metadata) => {
      const path = nextPath()
      await writeSafetensors(path, tensors, metadata)
      const back = await readSafetensors(path)
      expect(comparable(back.tensors)).toEqual(comparable(tensors))
      expect(back.metadata).toEqual(metadata ?? {})
    }), { numRuns: 80 })
  })
})

describe('write -> read -> write is byte-identical, and the file equals serializeSafetensors', () => {
  it('holds for random inputs', async () => {
    await fc.assert(fc.asyncProperty(tensorMapArb, metadataArb, async (tensors, metadata) => {
      const first = nextPath()
      const second = nextPath()
      await writeSafetensors(first, tensors, metadata)
      const back = await readSafetensors(first)
      await writeSafetensors(second, back.tensors, back.metadata)
      const [a, b] = await Promise.all([readFile(first), readFile(second)])
      expect(sameBytes(a, b)).toBe(true)
      expect(sameBytes(a, serializeSafetensors(tensors, metadata))).toBe(true)
    }), { numRuns: 60 })
  })
})

describe('written files follow the reference layout', () => {
  it('tensors back to back in reference order, data 8-aligned, header padded with spaces only', async () => {
    await fc.assert(fc.asyncProperty(tensorMapArb, metadataArb, async (tensors, metadata) => {
      const path = nextPath()
      await writeSafetensors(path, tensors, metadata)
      const file = await SafetensorsFile.open(path)
      try {
        const infos = [...file.tensors.values()]
        for (let i = 1; i < infos.length; i++) {
          expect(compareReferenceOrder(infos[i - 1], infos[i])).toBeLessThan(0)
          expect(infos[i].begin).toBe(infos[i - 1].end)
        }
        expect(file.dataStart % 8).toBe(0)
        const raw = await readFile(path)
        const header = raw.subarray(8, file.dataStart)
        const jsonEnd = header.lastIndexOf(0x7d) + 1
        expect(header.length - jsonEnd).toBeLessThan(8)
        expect([...header.subarray(jsonEnd)].every(b => b === 0x20)).toBe(true)
        // The header JSON lists tensors in the same order as their bytes.
        const keys = [...new TextDecoder().decode(header.subarray(0, jsonEnd)).matchAll(/"data_offsets":\[(\d+),/g)].map(m => Number(m[1]))
        expect(keys).toEqual(infos.map(t => t.begin))
      } finally {
        await file.close()
      }
    }), { numRuns: 40 })
  })
})

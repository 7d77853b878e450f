// Every broken file in the committed corpus is refused with its expected message, naming the file.
// Regenerate the corpus with: npx tsx harness/make-broken-safetensors.ts
import { describe, it, expect } from 'vitest'
import { readFileSync, readdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { SafetensorsError } from '../../src/errors.ts'
import { SafetensorsFile, readSafetensors } from '../../src/formats/safetensors/index.ts'

const CORPUS = join(dirname(fileURLToPath(import.meta.url)), 'corpus')
const expected: Record<string, { expect: string, why: string }> = JSON.parse(readFileSync(join(CORPUS, 'expected.json'), 'utf8'))

describe('the corpus listing matches the files on disk', () => {
  it('lists every .safetensors file and only those', () => {
    const onDisk = readdirSync(CORPUS).filter(f => f.endsWith('.safetensors')).sort()
    expect(Object.keys(expected).sort()).toEqual(onDisk)
    expect(onDisk.length).toBeGreaterThanOrEqual(50)
  })
})

describe('SafetensorsFile.open refuses each broken file with its expected message', () => {
  it.each(Object.entries(expected))('%s', async (file, { expect: fragment }) => {
    const path = join(CORPUS, file)
    const error = await SafetensorsFile.open(path).then(() => null, (e: unknown) => e)
    expect(error).toBeInstanceOf(SafetensorsError)
    const e = error as SafetensorsError
    expect(e.file).toBe(path)
    expect(e.message.startsWith(`${path}: `)).toBe(true)
    expect(e.message).toContain(fragment)
  })
})

describe('readSafetensors refuses them the same way', () => {
  it('gives the same message as open for every file', async () => {
    for (const [file, { expect: fragment }] of Object.entries(expected)) {
      const path = join(CORPUS, file)
      await expect(readSafetensors(path)).rejects.toThrow(fragment)
    }
  })
})

// Checkpoint directories: huggingface_hub's sharding rule, transformers' index bytes, strict opening.
import { describe, it, expect, beforeEach, afterEach } from 'vitest'
import { readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import fc from 'fast-check'
import { SafetensorsError } from '../../src/errors.ts'
import {
  ShardedCheckpoint, encodeShardIndex, readSafetensors, splitIntoShards, tensorFrom, writeSafetensors, writeShardedCheckpoint, type Tensor,
} from '../../src/formats/safetensors/index.ts'
import { comparable, tempDir, tensorMapArb } from './helpers.ts'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({ dir, cleanup } = await tempDir()))
afterEach(async () => await cleanup())

const u8 = (n: number, fill: number): Tensor => tensorFrom('U8', [n], new Uint8Array(n).fill(fill))
/** b (8 bytes), a (8), c (4) with a 12-byte limit: huggingface_hub makes [b], [a, c]. */
const threeTensors = (): Map<string, Tensor> => new Map([['b', u8(8, 1)], ['a', u8(8, 2)], ['c', u8(4, 3)]])

describe('splitIntoShards follows huggingface_hub split_state_dict_into_shards_factory', () => {
  it('fills greedily in insertion order (the docstring example: 6,6,2,6,2,2 under 10)', () => {
    const sizes: [string, number][] = [['t0', 6], ['t1', 6], ['t2', 2], ['t3', 6], ['t4', 2], ['t5', 2]]
    expect(splitIntoShards(sizes, 10)).toEqual([['t0'], ['t1', 't2'], ['t3', 't4', 't5']])
  })
  it('puts an oversized tensor in its own shard, appended ahead of the shard being filled', () => {
    expect(splitIntoShards([['small', 2], ['huge', 20], ['tail', 3]], 10)).toEqual([['huge'], ['small', 'tail']])
  })
  it('keeps a tensor exactly at the limit in the current shard', () => {
    expect(splitIntoShards([['a', 4], ['b', 6], ['c', 1]], 10)).toEqual([['a', 'b'], ['c']])
  })
})

describe('the index file is byte-identical to transformers\' json.dumps(indent=2, sort_keys=True) + "\\n"', () => {
  it('writes total_size and a sorted weight_map', async () => {
    const { files } = await writeShardedCheckpoint(dir, threeTensors(), { maxShardBytes: 12 })
    expect(files).toEqual(['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors', 'model.safetensors.index.json'])
    expect(await readFile(join(dir, 'model.safetensors.index.json'), 'utf8')).toBe(
      '{\n' +
      '  "metadata": {\n' +
      '    "total_size": 20\n' +
      '  },\n' +
      '  "weight_map": {\n' +
      '    "a": "model-00002-of-00002.safetensors",\n' +
      '    "b": "model-00001-of-00002.safetensors",\n' +
      '    "c": "model-00002-of-00002.safetensors"\n' +
      '  }\n' +
      '}\n')
  })
  it('escapes like Python ensure_ascii and sorts by code point, with total_parameters when given', () => {
    const map = new Map([['z', 'f1'], ['\u00e9', 'f2'], ['\u{1F600}', 'f3'], ['\uFB01', 'f4'], ['q"\\\n\u007f', 'f5']])
    expect(encodeShardIndex(99, map, 7)).toBe(
      '{\n' +
      '  "metadata": {\n' +
      '    "total_parameters": 7,\n' +
      '    "total_size": 99\n' +
      '  },\n' +
      '  "weight_map": {\n' +
      '    "q\\"\\\\\\n\\u007f": "f5",\n' +
      '    "z": "f1",\n' +
      '    "\\u00e9": "f2",\n' +
      '    "\\ufb01": "f4",\n' +
      '    "\\ud83d\\ude00": "f3"\n' +
      '  }\n' +
      '}\n')
  })
})

describe('write -> open -> read round trip, single file or sharded', () => {
  it('holds for random tensors and shard limits', async () => {
    let run = 0
    await fc.assert(fc.asyncProperty(tensorMapArb, fc.integer({ min: 1, max: 64 }), async (tensors, maxShardBytes) => {
      const target = join(dir, `ck${run++}`)
      const { files } = await writeShardedCheckpoint(target, tensors, { maxShardBytes, metadata: { format: 'pt' } })
      const expectedShards = splitIntoShards([...tensors].map(([n, t]) => [n, t.data.byteLength]), maxShardBytes)
      if (expectedShards.length <= 1) expect(files).toEqual(['model.safetensors'])
      else expect(files).toHaveLength(expectedShards.length + 1)
      expect((await readdir(target)).sort()).toEqual([...files].sort())
      const ck = await ShardedCheckpoint.open(target)
      try {
        const back = new Map<string, Tensor>()
        for (const name of ck.names()) back.set(name, await ck.read(name))
        expect(comparable(back)).toEqual(comparable(tensors))
        expectedShards.forEach((names, i) => {
          for (const name of names) {
            expect(ck.info(name).file).toBe(expectedShards.length > 1 ? `model-${String(i + 1).padStart(5, '0')}-of-${String(expectedShards.length).padStart(5, '0')}.safetensors` : 'model.safetensors')
          }
        })
      } finally {
        await ck.close()
      }
    }), { numRuns: 30 })
  })

  it('writes metadata into every shard and gives info with dtype, shape and file', async () => {
    await writeShardedCheckpoint(dir, threeTensors(), { maxShardBytes: 12, metadata: { format: 'pt' } })
    for (const f of ['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors']) {
      expect((await readSafetensors(join(dir, f))).metadata).toEqual({ format: 'pt' })
    }
    const ck = await ShardedCheckpoint.open(dir)
    expect(ck.info('c')).toEqual({ name: 'c', dtype: 'U8', shape: [4], begin: 8, end: 12, file: 'model-00002-of-00002.safetensors' })
    expect(ck.names()).toEqual(['b', 'a', 'c'])
    await ck.close()
  })
})

describe('rewriting a directory removes the previous checkpoint files', () => {
  it('sharded then single, and single then sharded, leave only the new files', async () => {
    await writeFile(join(dir, 'config.json'), '{}')
    await writeShardedCheckpoint(dir, threeTensors(), { maxShardBytes: 12 })
    await writeShardedCheckpoint(dir, threeTensors())
    expect((await readdir(dir)).sort()).toEqual(['config.json', 'model.safetensors'])
    await writeShardedCheckpoint(dir, threeTensors(), { maxShardBytes: 12 })
    expect((await readdir(dir)).sort()).toEqual(['config.json', 'model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors', 'model.safetensors.index.json'])
  })
})

describe('opening a broken checkpoint directory fails clearly', () => {
  const index = (): string => join(dir, 'model.safetensors.index.json')
  const editIndex = async (edit: (j: { weight_map: Record<string, string> }) => void): Promise<void> => {
    const j = JSON.parse(await readFile(index(), 'utf8'))
    edit(j)
    await writeFile(index(), JSON.stringify(j))
  }
  const openError = async (): Promise<SafetensorsError> => {
    const e = await ShardedCheckpoint.open(dir).then(() => null, (x: unknown) => x)
    expect(e).toBeInstanceOf(SafetensorsError)
    return e as SafetensorsError
  }
  beforeEach(async () => { await writeShardedCheckpoint(dir, threeTensors(), { maxShardBytes: 12 }) })

  it('a missing shard', async () => {
    await rm(join(dir, 'model-00002-of-00002.safetensors'))
    const e = await openError()
    expect(e.file).toBe(index())
    expect(e.message).toContain('shard "model-00002-of-00002.safetensors" (holding "a" per the weight_map) does not exist')
  })
  it('a weight_map entry for a tensor its shard lacks', async () => {
    await editIndex(j => { j.weight_map.ghost = 'model-00001-of-00002.safetensors' })
    expect((await openError()).message).toContain('weight_map puts tensor "ghost" in "model-00001-of-00002.safetensors", which does not hold it')
  })
  it('a tensor present in two shards', async () => {
    await writeSafetensors(join(dir, 'model-00002-of-00002.safetensors'), { a: u8(8, 2), b: u8(8, 9), c: u8(4, 3) })
    expect((await openError()).message).toContain('tensor "b" is present in two shards: "model-00001-of-00002.safetensors" and "model-00002-of-00002.safetensors"')
  })
  it('a shard tensor the index does not list', async () => {
    await editIndex(j => { delete j.weight_map.c })
    expect((await openError()).message).toContain('shard "model-00002-of-00002.safetensors" holds tensor "c", which the weight_map does not list')
  })
  it('an index that is not JSON', async () => {
    await writeFile(index(), '{"weight_map": {')
    const e = await openError()
    expect(e.message).toBe(`${index()}: index is not valid JSON: unexpected end of text (expected a string key) at character 16`)
  })
  it('an index with a duplicate weight_map key', async () => {
    await writeFile(index(), '{"weight_map": {"a": "model-00002-of-00002.safetensors", "a": "model-00001-of-00002.safetensors"}}')
    expect((await openError()).message).toContain('duplicate key "a" in "weight_map"')
  })
  it('an index without a weight_map, or with a non-string entry', async () => {
    await writeFile(index(), '{"metadata": {}}')
    expect((await openError()).message).toContain('index has no "weight_map"')
    await writeFile(index(), '{"weight_map": {"a": 3}}')
    expect((await openError()).message).toContain('index weight_map entry "a" must be a file name string, got the number 3')
  })
  it('a weight_map entry that points outside the directory', async () => {
    await editIndex(j => { j.weight_map.a = '../model-00002-of-00002.safetensors' })
    expect((await openError()).message).toContain('points at "../model-00002-of-00002.safetensors", which is not a plain file name in this directory')
  })
  it('a broken shard: the shard file is named in the error', async () => {
    await writeFile(join(dir, 'model-00002-of-00002.safetensors'), 'garbage')
    const e = await openError()
    expect(e.file).toBe(join(dir, 'model-00002-of-00002.safetensors'))
    expect(e.message).toContain('shorter than the 8-byte header length')
  })
  it('both model.safetensors and an index', async () => {
    await writeSafetensors(join(dir, 'model.safetensors'), {})
    expect((await openError()).message).toContain('holds both model.safetensors and model.safetensors.index.json')
  })
  it('neither file', async () => {
    await rm(index())
    const e = await openError()
    expect(e.file).toBe(dir)
    expect(e.message).toContain('holds neither model.safetensors nor model.safetensors.index.json')
  })
})

describe('asking an open checkpoint for an unknown tensor', () => {
  it('is a SafetensorsError naming the directory and the tensor', async () => {
    await writeShardedCheckpoint(dir, threeTensors())
    const ck = await ShardedCheckpoint.open(dir)
    expect(() => ck.info('nope')).toThrow(`${dir}: no tensor named "nope" in this checkpoint`)
    await expect(ck.read('nope')).rejects.toThrow(SafetensorsError)
    await ck.close()
  })
})

describe('writeShardedCheckpoint refuses bad options', () => {
  it('rejects a non-positive shard limit and a non-Map', async () => {
    await expect(writeShardedCheckpoint(dir, threeTensors(), { maxShardBytes: 0 })).rejects.toThrow('maxShardBytes must be a positive integer, got 0')
    await expect(writeShardedCheckpoint(dir, {} as Map<string, Tensor>)).rejects.toThrow('tensors must be a Map')
  })
})

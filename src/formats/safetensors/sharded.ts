// A Hugging Face checkpoint directory: model.safetensors, or shards plus model.safetensors.index.json.
import { mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { SafetensorsError } from '../../errors.ts'
import { AtomicFile } from '../atomic-file.ts'
import { SafetensorsFile } from './file.ts'
import type { TensorInfo } from './header.ts'
import { SHARD_INDEX_NAME, SINGLE_FILE_NAME, encodeShardIndex, isShardFileName, parseShardIndex, shardFileName } from './shard-index.ts'
import type { Tensor } from './tensor.ts'
import { writeSafetensors } from './writer.ts'
import { tensorEntries } from './write-checks.ts'
import { pathExists } from '../path-exists.ts'

/** huggingface_hub's default `max_shard_size` (5 GB, decimal). */
export const DEFAULT_MAX_SHARD_BYTES = 5_000_000_000

/** An index larger than this is not an index: refuse before reading it into memory. */
const MAX_INDEX_BYTES = 256 * 1024 * 1024

/** A checkpoint directory opened for random access to its tensors, whichever file holds them. */
export class ShardedCheckpoint {
  private constructor (
    /** The directory it was opened from. */
    readonly dir: string,
    private readonly files: Map<string, SafetensorsFile>,
    private readonly location: Map<string, string>,
  ) {}

  /**
   * Open `dir`: exactly one of model.safetensors or model.safetensors.index.json must be there.
   * With an index, every shard it names is opened and cross-checked: a missing shard, a tensor the
   * index places in a shard that lacks it, a tensor in two shards, or a shard tensor the index does
   * not list is a SafetensorsError naming the index file.
   */
  static async open (dir: string): Promise<ShardedCheckpoint> {
    const single = join(dir, SINGLE_FILE_NAME)
    const index = join(dir, SHARD_INDEX_NAME)
    const [hasSingle, hasIndex] = await Promise.all([pathExists(single), pathExists(index)])
    if (hasSingle && hasIndex) {
      throw new SafetensorsError(dir, `holds both ${SINGLE_FILE_NAME} and ${SHARD_INDEX_NAME}; which one is the checkpoint is ambiguous`)
    }
    if (!hasSingle && !hasIndex) throw new SafetensorsError(dir, `holds neither ${SINGLE_FILE_NAME} nor ${SHARD_INDEX_NAME}`)
    if (hasSingle) {
      const file = await SafetensorsFile.open(single)
      const location = new Map([...file.tensors.keys()].map(name => [name, SINGLE_FILE_NAME]))
      return new ShardedCheckpoint(dir, new Map([[SINGLE_FILE_NAME, file]]), location)
    }
    const files = new Map<string, SafetensorsFile>()
    try {
      const location = await openShards(index, dir, files)
      return new ShardedCheckpoint(dir, files, location)
    } catch (e) {
      await Promise.all([...files.values()].map(f => f.close()))
      throw e
    }
  }

  /** Every tensor name: shard files in name order, and within a file in the order of its bytes. */
  names (): string[] {
    return [...this.location.keys()]
  }

  /** The file names holding the tensors (relative to `dir`), in name order. */
  fileNames (): string[] {
    return [...this.files.keys()]
  }

  /** Where tensor `name` lives: its placement plus the file name (relative to `dir`). */
  info (name: string): TensorInfo & { file: string } {
    const file = this.fileOf(name)
    return { ...(this.files.get(file) as SafetensorsFile).info(name), file }
  }

  /** Read one tensor from its shard (an offset read of just its bytes). */
  async read (name: string): Promise<Tensor> {
    return await (this.files.get(this.fileOf(name)) as SafetensorsFile).read(name)
  }

  /** Close every open shard. */
  async close (): Promise<void> {
    await Promise.all([...this.files.values()].map(f => f.close()))
  }

  private fileOf (name: string): string {
    const file = this.location.get(name)
    if (file === undefined) throw new SafetensorsError(this.dir, `no tensor named ${JSON.stringify(name)} in this checkpoint`)
    return file
  }
}

/** Open the shards an index names into `files`; returns tensor name -> shard, in shard order. */
async function openShards (index: string, dir: string, files: Map<string, SafetensorsFile>): Promise<Map<string, string>> {
  const { size } = await stat(index)
  if (size > MAX_INDEX_BYTES) throw new SafetensorsError(index, `index is ${size} bytes, over the ${MAX_INDEX_BYTES}-byte limit`)
  let text: string
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(await readFile(index))
  } catch {
    throw new SafetensorsError(index, 'index is not valid UTF-8')
  }
  const weightMap = parseShardIndex(text, index)
  const shardNames = [...new Set(weightMap.values())].sort()
  for (const shard of shardNames) {
    const path = join(dir, shard)
    if (!await pathExists(path)) {
      const example = [...weightMap].find(([, s]) => s === shard)?.[0] as string
      throw new SafetensorsError(index, `shard ${JSON.stringify(shard)} (holding ${JSON.stringify(example)} per the weight_map) does not exist`)
    }
    files.set(shard, await SafetensorsFile.open(path))
  }
  const location = new Map<string, string>()
  for (const [shard, file] of files) {
    for (const name of file.tensors.keys()) {
      const other = location.get(name)
      if (other !== undefined) throw new SafetensorsError(index, `tensor ${JSON.stringify(name)} is present in two shards: ${JSON.stringify(other)} and ${JSON.stringify(shard)}`)
      location.set(name, shard)
    }
  }
  for (const [name, shard] of weightMap) {
    if (location.get(name) !== shard) {
      throw new SafetensorsError(index, `weight_map puts tensor ${JSON.stringify(name)} in ${JSON.stringify(shard)}, which does not hold it`)
    }
  }
  for (const [name, shard] of location) {
    if (!weightMap.has(name)) throw new SafetensorsError(index, `shard ${JSON.stringify(shard)} holds tensor ${JSON.stringify(name)}, which the weight_map does not list`)
  }
  return location
}

/** Options for `writeShardedCheckpoint`. */
export interface ShardOptions {
  /** Largest shard in bytes of tensor data (default 5 GB, as huggingface_hub). */
  maxShardBytes?: number
  /** Metadata for every safetensors file (transformers writes `{ format: 'pt' }`). */
  metadata?: Record<string, string>
  /** When given, written as the index's `metadata.total_parameters`, as transformers 5 does. */
  totalParameters?: number
}

/**
 * Split tensors into shards exactly as huggingface_hub's `split_state_dict_into_shards_factory`:
 * walk in insertion order; a tensor larger than the limit gets a shard of its own (appended at
 * once, ahead of the shard being filled); otherwise start a new shard when adding it would pass
 * the limit. Returns the shards in file order.
 */
export function splitIntoShards (sizes: [string, number][], maxShardBytes: number): string[][] {
  const shards: string[][] = []
  let current: string[] = []
  let currentBytes = 0
  for (const [name, bytes] of sizes) {
    if (bytes > maxShardBytes) {
      shards.push([name])
      continue
    }
    if (currentBytes + bytes > maxShardBytes) {
      shards.push(current)
      current = []
      currentBytes = 0
    }
    current.push(name)
    currentBytes += bytes
  }
  if (current.length > 0) shards.push(current)
  return shards
}

/**
 * Write a checkpoint directory as transformers' save_pretrained does: one `model.safetensors` when
 * everything fits in one shard (no index), else `model-0000i-of-0000N.safetensors` files plus
 * `model.safetensors.index.json`. Each file uses the reference layout. Older checkpoint files in
 * `dir` (model.safetensors, the index, any `model-NNNNN-of-NNNNN.safetensors`) are removed first,
 * and the index is written last, so a reader never sees an index that points at missing shards.
 * Returns the file names written (relative to `dir`), shards first, then the index if any.
 */
export async function writeShardedCheckpoint (dir: string, tensors: Map<string, Tensor>, opts: ShardOptions = {}): Promise<{ files: string[] }> {
  const maxShardBytes = opts.maxShardBytes ?? DEFAULT_MAX_SHARD_BYTES
  if (!Number.isSafeInteger(maxShardBytes) || maxShardBytes <= 0) {
    throw new SafetensorsError(dir, `maxShardBytes must be a positive integer, got ${String(opts.maxShardBytes)}`)
  }
  if (opts.totalParameters !== undefined && (!Number.isSafeInteger(opts.totalParameters) || opts.totalParameters < 0)) {
    throw new SafetensorsError(dir, `totalParameters must be a non-negative integer, got ${String(opts.totalParameters)}`)
  }
  if (!(tensors instanceof Map)) throw new SafetensorsError(dir, 'tensors must be a Map of name -> tensor')
  const entries = tensorEntries(dir, tensors)
  const shards = splitIntoShards(entries.map(([name, t]) => [name, t.data.byteLength]), maxShardBytes)
  await mkdir(dir, { recursive: true })
  const stale = (await readdir(dir)).filter(f => f === SINGLE_FILE_NAME || f === SHARD_INDEX_NAME || isShardFileName(f))
  await Promise.all(stale.map(f => rm(join(dir, f), { force: true })))

  if (shards.length <= 1) {
    await writeSafetensors(join(dir, SINGLE_FILE_NAME), tensors, opts.metadata)
    return { files: [SINGLE_FILE_NAME] }
  }
  const files: string[] = []
  const weightMap = new Map<string, string>()
  let totalSize = 0
  for (const [i, names] of shards.entries()) {
    const file = shardFileName(i, shards.length)
    const shard = new Map(names.map(name => [name, tensors.get(name) as Tensor]))
    await writeSafetensors(join(dir, file), shard, opts.metadata)
    for (const [name, t] of shard) {
      weightMap.set(name, file)
      totalSize += t.data.byteLength
    }
    files.push(file)
  }
  const index = await AtomicFile.create(join(dir, SHARD_INDEX_NAME))
  try {
    await writeFile(index.handle, encodeShardIndex(totalSize, weightMap, opts.totalParameters))
    await index.commit()
  } catch (e) {
    await index.discard()
    throw new SafetensorsError(join(dir, SHARD_INDEX_NAME), `writing the index failed: ${(e as Error).message}`)
  }
  files.push(SHARD_INDEX_NAME)
  return { files }
}

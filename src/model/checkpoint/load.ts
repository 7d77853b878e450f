// Loading a DeepSeek-V4 checkpoint directory and checking it against what its config implies.
import { stat } from 'node:fs/promises'
import { join } from 'node:path'
import { CheckpointError, ConfigError } from '../../errors.ts'
import { ShardedCheckpoint, viewAs, type Tensor } from '../../formats/safetensors/index.ts'
import { loadDeepseekV4Config, type DeepseekV4Config } from '../config.ts'
import { loadTokenizer, type Tokenizer } from '../tokenizer/index.ts'
import { expectedParameters } from './params.ts'
import { WeightStore } from './store.ts'

/** A loaded checkpoint. `tokenizer` is absent when the directory has no tokenizer.json. */
export interface LoadedCheckpoint {
  config: DeepseekV4Config
  weights: WeightStore
  tokenizer?: Tokenizer
}

/** Tensor names transformers skips on load (multi-token-prediction layers): ignored here too. */
const IGNORED_UNEXPECTED = /(^|\.)mtp\./

async function isFile (path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile()
  }
  catch {
    return false
  }
}

function showShape (shape: readonly number[]): string {
  return `[${shape.join(', ')}]`
}

/**
 * Load `dir`: config.json (ConfigError if missing or invalid), the weights (model.safetensors or
 * shards + index), and tokenizer.json if present. The tensors must match expectedParameters(config)
 * exactly: a missing, unexpected (other than mtp.*), wrongly shaped or wrongly typed tensor, or a
 * tid2eid entry outside [0, n_routed_experts), is a CheckpointError naming the tensor.
 */
export async function loadCheckpoint (dir: string): Promise<LoadedCheckpoint> {
  const configFile = join(dir, 'config.json')
  if (!await isFile(configFile)) {
    throw new ConfigError('config.json', 'missing: a checkpoint directory needs a config.json', configFile)
  }
  const config = await loadDeepseekV4Config(configFile)
  const expected = expectedParameters(config)

  const checkpoint = await ShardedCheckpoint.open(dir)
  const tensors = new Map<string, Tensor>()
  try {
    const present = new Set(checkpoint.names())
    const wanted = new Set(expected.map((p) => p.name))
    const missing = expected.filter((p) => !present.has(p.name))
    if (missing.length > 0) {
      const more = missing.length > 1 ? ` (and ${missing.length - 1} more missing)` : ''
      throw new CheckpointError(missing[0].name, `missing from the checkpoint${more}`, dir)
    }
    const unexpected = [...present].filter((n) => !wanted.has(n) && !IGNORED_UNEXPECTED.test(n))
    if (unexpected.length > 0) {
      const more = unexpected.length > 1 ? ` (and ${unexpected.length - 1} more)` : ''
      throw new CheckpointError(unexpected[0], `unexpected: the config implies no such tensor${more}`, dir)
    }
    for (const spec of expected) {
      const info = checkpoint.info(spec.name)
      const sameShape = info.shape.length === spec.shape.length && info.shape.every((d, i) => d === spec.shape[i])
      if (!sameShape) {
        throw new CheckpointError(spec.name, `wrong shape: expected ${showShape(spec.shape)}, found ${showShape(info.shape)}`, dir)
      }
      if (info.dtype !== spec.dtype) {
        throw new CheckpointError(spec.name, `wrong dtype: expected ${spec.dtype}, found ${info.dtype}`, dir)
      }
    }
    for (const spec of expected) {
      const t = await checkpoint.read(spec.name)
      if (spec.init.kind === 'distinct-ids') checkExpertIds(spec.name, t, config.nRoutedExperts, dir)
      tensors.set(spec.name, t)
    }
  }
  finally {
    await checkpoint.close()
  }

  const tokenizer = await isFile(join(dir, 'tokenizer.json')) ? await loadTokenizer(dir) : undefined
  if (tokenizer !== undefined && tokenizer.vocabSize > config.vocabSize) {
    throw new ConfigError('vocab_size', `the tokenizer has ${tokenizer.vocabSize} ids but the model only ${config.vocabSize}`, configFile)
  }
  return { config, weights: new WeightStore(tensors, dir), tokenizer }
}

function checkExpertIds (name: string, t: Tensor, experts: number, dir: string): void {
  const ids = viewAs(t, 'I64')
  const limit = BigInt(experts)
  for (let i = 0; i < ids.length; i++) {
    if (ids[i] < 0n || ids[i] >= limit) {
      const width = t.shape[t.shape.length - 1]
      throw new CheckpointError(name,
        `expert id ${ids[i]} at [${Math.floor(i / width)}, ${i % width}] is outside [0, ${experts}) (n_routed_experts)`, dir)
    }
  }
}

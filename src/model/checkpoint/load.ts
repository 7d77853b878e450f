// Loading a DeepSeek-V4 checkpoint directory and checking it against what its config implies.
import { stat } from 'node:fs/promises'
import { join } from 'node:path'
import { CheckpointError, ConfigError } from '../../errors.ts'
import { ShardedCheckpoint, viewAs, type Tensor } from '../../formats/safetensors/index.ts'
import { loadDeepseekV4Config, type DeepseekV4Config } from '../config.ts'
import { loadTokenizer, type Tokenizer } from '../tokenizer/index.ts'
import { materialize } from './materialize.ts'
import type { Naming } from './naming.ts'
import { planCheckpoint, type CheckpointPlan, type FileSource } from './sources.ts'
import { WeightStore } from './store.ts'

/** How a checkpoint stores its tensors (what `inspect` reports). */
export interface CheckpointSource {
  /** `deepseek` (save_pretrained / hub names) or `transformers` (module names). */
  naming: Naming
  /** Whether it uses the hub's original spellings (layers without the `model.` prefix, `embed.weight`, ...). */
  hubSpelling: boolean
  /** Whether experts come as one tensor per expert (else stacked). */
  perExpert: boolean
  /** File tensors per stored format (`BF16`, `F32`, `F16`, `I64`, `F8_E4M3+ue8m0`, ...), scale companions folded into their weight. */
  formats: Record<string, number>
  /** Ignored file tensors (mtp.*). */
  ignored: string[]
}

/** A loaded checkpoint. `tokenizer` is absent when the directory has no tokenizer.json. */
export interface LoadedCheckpoint {
  config: DeepseekV4Config
  weights: WeightStore
  tokenizer?: Tokenizer
  source: CheckpointSource
}

async function isFile (path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile()
  }
  catch {
    return false
  }
}

/** config.json of `dir`, parsed (ConfigError if missing or invalid). */
async function readConfig (dir: string): Promise<DeepseekV4Config> {
  const configFile = join(dir, 'config.json')
  if (!await isFile(configFile)) {
    throw new ConfigError('config.json', 'missing: a checkpoint directory needs a config.json', configFile)
  }
  return loadDeepseekV4Config(configFile)
}

function describeSource (plan: CheckpointPlan): CheckpointSource {
  const formats: Record<string, number> = {}
  const count = (s: FileSource) => {
    const key = s.scale === undefined ? s.dtype : `${s.dtype}+${s.scale.dtype === 'F8_E8M0' ? 'ue8m0' : s.scale.dtype.toLowerCase()}`
    formats[key] = (formats[key] ?? 0) + 1
  }
  for (const t of plan.tensors) {
    if (t.kind === 'whole') count(t.source)
    else t.parts.forEach((row) => row.forEach(count))
  }
  return { naming: plan.naming, hubSpelling: plan.hubSpelling, perExpert: plan.perExpert, formats, ignored: [...plan.ignored] }
}

/** What the headers of the checkpoint in `dir` say (no tensor data is read): config, naming, formats, parameter count. */
export async function describeCheckpoint (dir: string): Promise<{ config: DeepseekV4Config, source: CheckpointSource, parameters: number }> {
  const config = await readConfig(dir)
  const checkpoint = await ShardedCheckpoint.open(dir)
  try {
    const plan = planCheckpoint(config, new Map(checkpoint.names().map((n) => [n, checkpoint.info(n)])), dir)
    const parameters = plan.tensors.reduce((a, t) => a + t.spec.shape.reduce((x, y) => x * y, 1), 0)
    return { config, source: describeSource(plan), parameters }
  }
  finally {
    await checkpoint.close()
  }
}

/**
 * Read internal tensors of the checkpoint in `dir` (config `cfg`): all of them, or only `names`
 * (internal names, as params.ts lists them). The file may use either naming; see planCheckpoint.
 */
export async function readCheckpointTensors (dir: string, cfg: DeepseekV4Config, names?: readonly string[]): Promise<{ tensors: Map<string, Tensor>, source: CheckpointSource }> {
  const checkpoint = await ShardedCheckpoint.open(dir)
  try {
    const infos = new Map(checkpoint.names().map((n) => [n, checkpoint.info(n)]))
    const plan = planCheckpoint(cfg, infos, dir)
    const wanted = names === undefined ? null : new Set(names)
    if (wanted !== null) {
      const known = new Set(plan.tensors.map((t) => t.spec.name))
      const absent = [...wanted].find((n) => !known.has(n))
      if (absent !== undefined) throw new CheckpointError(absent, 'is not a tensor of this config', dir)
    }
    const tensors = new Map<string, Tensor>()
    const read = (name: string) => checkpoint.read(name)
    for (const t of plan.tensors) {
      if (wanted !== null && !wanted.has(t.spec.name)) continue
      const tensor = await materialize(t, read, dir)
      if (t.spec.init.kind === 'distinct-ids') checkExpertIds(t.kind === 'whole' ? t.source.name : t.spec.name, tensor, cfg.nRoutedExperts, dir)
      tensors.set(t.spec.name, tensor)
    }
    return { tensors, source: describeSource(plan) }
  }
  finally {
    await checkpoint.close()
  }
}

/**
 * Load `dir`: config.json (ConfigError if missing or invalid), the weights (model.safetensors or
 * shards + index), and tokenizer.json if present. The tensors may use DeepSeek's names (as
 * save_pretrained and the hub write them) or transformers' module names, never both; they are
 * mapped to the internal layout of expectedParameters(config). A missing, unexpected (other than
 * mtp.*), duplicated, wrongly shaped or wrongly typed tensor, or a tid2eid entry outside
 * [0, n_routed_experts), is a CheckpointError naming the tensor as the file spells it.
 */
export async function loadCheckpoint (dir: string): Promise<LoadedCheckpoint> {
  const config = await readConfig(dir)
  const { tensors, source } = await readCheckpointTensors(dir, config)
  const tokenizer = await isFile(join(dir, 'tokenizer.json')) ? await loadTokenizer(dir) : undefined
  if (tokenizer !== undefined && tokenizer.vocabSize > config.vocabSize) {
    throw new ConfigError('vocab_size', `the tokenizer has ${tokenizer.vocabSize} ids but the model only ${config.vocabSize}`, join(dir, 'config.json'))
  }
  return { config, weights: new WeightStore(tensors, dir), tokenizer, source }
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

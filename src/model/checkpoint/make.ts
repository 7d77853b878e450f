// make-checkpoint: a deterministic synthetic DeepSeek-V4 checkpoint in Hugging Face layout.
import { mkdir, readdir, rm, stat, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { PdBridgeError } from '../../errors.ts'
import { tensorFrom, writeShardedCheckpoint, type Tensor } from '../../formats/safetensors/index.ts'
import { pythonStyleJson, toHfConfigJson, type DeepseekV4Config } from '../config.ts'
import { HF_FORMAT_VERSION } from '../config/defaults.ts'
import { buildTokenizerFiles, PAD_TOKEN, NAMED_SPECIAL_TOKENS, type CheckpointChatFormat, type TokenizerStructure } from '../tokenizer/index.ts'
import { initialValues, mirrorIndexerHeads } from './init.ts'
import { deepseekLayout } from './naming.ts'
import { expectedParameters } from './params.ts'
import { NEEDLE_PRESETS, presetConfig } from './presets.ts'
import { assertSeed } from './random.ts'
import { writeNeedleCircuit } from './needle/circuit.ts'
import { needleVocabulary } from './needle/words.ts'


/** What to make. */
export interface MakeCheckpointOptions {
  /** A preset name (see PRESET_NAMES). */
  preset: string
  /** Non-negative integer; same preset + seed gives byte-identical files. */
  seed: number
  /** Output directory (created if absent). */
  out: string
  /** Shard the weights into files of at most this many bytes of tensor data (default: one file up to 5 GB). */
  maxShardBytes?: number
  /** Allow a non-empty `out`: checkpoint files there are replaced, other files are left alone. */
  force?: boolean
  /**
   * Opt-in, off by default (the default bytes are unchanged): pair the indexer's heads with opposite
   * queries so its top-k never meets exact ties (see mirrorIndexerHeads). Needs an even index_n_heads.
   */
  mirrorIndexerHeads?: boolean
  /** The tokenizer.json structure (default gpt2, which every committed fixture was made with; deepseek-v3 is DeepSeek's published one). */
  tokenizerStructure?: TokenizerStructure
  /** How chats render (default make-checkpoint's template; deepseek-v4-encoding writes no template, as DeepSeek ships V4). */
  chatFormat?: CheckpointChatFormat
  /** Called after each tensor is generated (for progress: generation is most of the time on large presets). */
  onTensor?: (done: number, total: number) => void
}

/** What was made. */
export interface MadeCheckpoint {
  dir: string
  config: DeepseekV4Config
  /** Every file written, relative to `dir`, sorted. */
  files: string[]
  /** Number of tensors and of scalar parameters written. */
  tensorCount: number
  parameterCount: number
}

/** Files this command writes besides the weights; --force replaces exactly these (and the weight files). */
const SIDE_FILES = ['config.json', 'generation_config.json', 'tokenizer.json', 'tokenizer_config.json', 'special_tokens_map.json']

/** config.json: the new-style config plus the keys transformers' save_pretrained adds (float fields as floats). */
export function checkpointConfigJson (cfg: DeepseekV4Config): string {
  return pythonStyleJson({
    ...toHfConfigJson(cfg),
    architectures: ['DeepseekV4ForCausalLM'],
    dtype: 'bfloat16',
    torch_dtype: 'bfloat16',
  })
}

/** generation_config.json: the special token ids generation needs. */
export function generationConfigJson (cfg: DeepseekV4Config): string {
  return pythonStyleJson({
    bos_token_id: cfg.bosTokenId,
    eos_token_id: cfg.eosTokenId,
    pad_token_id: NAMED_SPECIAL_TOKENS.indexOf(PAD_TOKEN),
    transformers_version: HF_FORMAT_VERSION,
  })
}

/**
 * The internal tensors renamed and split as save_pretrained writes them: DeepSeek's names, one
 * 2-D tensor per expert and projection (gate_up_proj[E] = [w1; w3], down_proj[E] = w2). Values
 * and dtypes unchanged, so loading the result gives back `tensors` bit for bit.
 */
export function toDeepseekTensors (cfg: DeepseekV4Config, tensors: ReadonlyMap<string, Tensor>): Map<string, Tensor> {
  const out = new Map<string, Tensor>()
  for (const saved of deepseekLayout(cfg)) {
    const t = tensors.get(saved.internal)
    if (t === undefined) throw new PdBridgeError(`toDeepseekTensors: no tensor ${saved.internal}`)
    if (saved.expert === undefined) {
      out.set(saved.name, t)
      continue
    }
    const [, rows, cols] = t.shape
    const bytes = t.data.length / (t.shape[0] * rows * cols)
    const start = (saved.expert * rows + saved.rows![0]) * cols * bytes
    const end = (saved.expert * rows + saved.rows![1]) * cols * bytes
    out.set(saved.name, { dtype: t.dtype, shape: [...saved.shape], data: t.data.subarray(start, end) })
  }
  return out
}

/** Every tensor of the checkpoint under its internal name, in expectedParameters order, filled for `seed`. */
export function makeTensors (cfg: DeepseekV4Config, seed: number, onTensor?: (done: number, total: number) => void): Map<string, Tensor> {
  assertSeed(seed)
  const tensors = new Map<string, Tensor>()
  const specs = expectedParameters(cfg)
  for (const spec of specs) {
    tensors.set(spec.name, tensorFrom(spec.dtype, spec.shape, initialValues(spec, seed)))
    onTensor?.(tensors.size, specs.length)
  }
  return tensors
}

async function prepareOutDir (out: string, force: boolean): Promise<void> {
  let entries: string[] | undefined
  try {
    const st = await stat(out)
    if (!st.isDirectory()) throw new PdBridgeError(`--out ${out}: exists and is not a directory`)
    entries = await readdir(out)
  }
  catch (err) {
    if (err instanceof PdBridgeError) throw err
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw new PdBridgeError(`--out ${out}: ${(err as Error).message}`)
  }
  if (entries !== undefined && entries.length > 0) {
    if (!force) throw new PdBridgeError(`--out ${out}: directory is not empty (pass --force to replace the checkpoint files in it)`)
    await Promise.all(SIDE_FILES.filter((f) => entries.includes(f)).map((f) => rm(join(out, f), { force: true })))
  }
  await mkdir(out, { recursive: true })
}

/**
 * Write a synthetic checkpoint: config.json, generation_config.json, model.safetensors (or shards
 * plus model.safetensors.index.json; metadata {"format": "pt"}) under the tensor names
 * save_pretrained writes (toDeepseekTensors), tokenizer.json,
 * tokenizer_config.json and special_tokens_map.json.
 */
export async function makeCheckpoint (opts: MakeCheckpointOptions): Promise<MadeCheckpoint> {
  const cfg = presetConfig(opts.preset)
  assertSeed(opts.seed)
  if (opts.maxShardBytes !== undefined && (!Number.isSafeInteger(opts.maxShardBytes) || opts.maxShardBytes <= 0)) {
    throw new PdBridgeError(`--max-shard-bytes must be a positive integer, got ${String(opts.maxShardBytes)}`)
  }
  await prepareOutDir(opts.out, opts.force === true)

  const needle = NEEDLE_PRESETS.includes(opts.preset)
  const tensors = makeTensors(cfg, opts.seed, opts.onTensor)
  if (needle) writeNeedleCircuit(cfg, opts.seed, tensors)
  if (opts.mirrorIndexerHeads === true) mirrorIndexerHeads(cfg, tensors)
  let parameterCount = 0
  for (const t of tensors.values()) parameterCount += t.shape.reduce((a, b) => a * b, 1)
  const { files: weightFiles } = await writeShardedCheckpoint(opts.out, toDeepseekTensors(cfg, tensors), {
    maxShardBytes: opts.maxShardBytes,
    metadata: { format: 'pt' },
    totalParameters: parameterCount,
  })

  const side: Record<string, string> = {
    'config.json': checkpointConfigJson(cfg),
    'generation_config.json': generationConfigJson(cfg),
    ...buildTokenizerFiles(cfg.vocabSize, cfg.maxPositionEmbeddings, needle ? needleVocabulary() : [], { structure: opts.tokenizerStructure, chatFormat: opts.chatFormat }),
  }
  for (const [name, text] of Object.entries(side)) await writeFile(join(opts.out, name), text)

  return {
    dir: opts.out,
    config: cfg,
    files: [...weightFiles, ...Object.keys(side)].sort(),
    tensorCount: tensors.size,
    parameterCount,
  }
}

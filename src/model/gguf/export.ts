// export-gguf: a DeepSeek-V4 checkpoint directory (either naming, any weight format loadCheckpoint
// reads) written as one GGUF file for llama.cpp's deepseek4.
import { stat } from 'node:fs/promises'
import { basename, dirname, join, resolve } from 'node:path'
import { PdBridgeError } from '../../errors.ts'
import { writeGgufFile, type GgufValue } from '../../formats/gguf/index.ts'
import { loadCheckpoint } from '../checkpoint/index.ts'
import { loadDeepseekV4Config } from '../config.ts'
import { checkExpressible, deepseek4Gguf, GgufExportError, type GgufTensorPlan, type GgufWeightType } from './deepseek4.ts'
import { idsOnlyTokenizerMetadata, tokenizerMetadata } from './tokenizer.ts'

/** What to export. */
export interface ExportGgufOptions {
  /** Checkpoint directory. */
  model: string
  /** The .gguf file to write. */
  out: string
  /** Type of the 2-D weights (default f32); norms, biases, hyper-connection tensors stay F32. */
  type?: GgufWeightType
  /** Write a placeholder vocabulary when the checkpoint has no tokenizer.json (token ids only). */
  idsOnly?: boolean
  /** Replace an existing `out`. */
  force?: boolean
}

/** What was written. */
export interface ExportedGguf {
  out: string
  bytes: number
  tensors: GgufTensorPlan[]
  metadata: Array<[string, GgufValue]>
  vocabulary: 'tokenizer.json' | 'ids-only'
}

async function exists (path: string): Promise<boolean> {
  return stat(path).then(() => true, () => false)
}

/** Check the output path before any work: its directory exists, and the file does not unless `force`. */
export async function checkGgufTarget (out: string, force: boolean): Promise<void> {
  const dir = dirname(resolve(out))
  if (!(await stat(dir).then((s) => s.isDirectory(), () => false))) throw new PdBridgeError(`--out ${out}: directory ${dir} does not exist`)
  if (await exists(out)) {
    if (!force) throw new PdBridgeError(`--out ${out}: exists (pass --force to replace it)`)
    if ((await stat(out)).isDirectory()) throw new PdBridgeError(`--out ${out}: is a directory`)
  }
}

/** Load the checkpoint in `model` and write it to `out` as a GGUF for llama.cpp's deepseek4. */
export async function exportGguf (o: ExportGgufOptions): Promise<ExportedGguf> {
  const type = o.type ?? 'f32'
  await checkGgufTarget(o.out, o.force === true)
  // The config alone decides most of what llama.cpp cannot express: refuse before reading weights.
  if (await exists(join(o.model, 'config.json'))) checkExpressible(await loadDeepseekV4Config(join(o.model, 'config.json')))
  const ckpt = await loadCheckpoint(o.model)
  const name = basename(resolve(o.model))
  const { metadata, tensors, plan } = deepseek4Gguf(ckpt, { name, type })
  let vocabulary: ExportedGguf['vocabulary']
  if (ckpt.tokenizer !== undefined) {
    metadata.push(...await tokenizerMetadata(o.model, ckpt.config, ckpt.tokenizer))
    vocabulary = 'tokenizer.json'
  }
  else if (o.idsOnly === true) {
    metadata.push(...idsOnlyTokenizerMetadata(ckpt.config))
    vocabulary = 'ids-only'
  }
  else {
    throw new GgufExportError(`${o.model}: no tokenizer.json to carry into the GGUF (pass --ids-only to write a placeholder vocabulary: llama.cpp can then be fed token ids but cannot tokenize text)`)
  }
  const bytes = await writeGgufFile(o.out, { metadata, tensors })
  return { out: o.out, bytes, tensors: plan, metadata, vocabulary }
}

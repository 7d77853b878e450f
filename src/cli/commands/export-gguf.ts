// `pd-bridge export-gguf`: a DeepSeek-V4 checkpoint as one GGUF file for llama.cpp's deepseek4
// (node-llama-cpp 3.22.1), with the checkpoint's own tokenizer (docs/llama-cpp.md).
import { Command } from 'commander'
import { PdBridgeError } from '../../errors.ts'
import { exportGguf, GGUF_WEIGHT_TYPES, type GgufWeightType } from '../../model/gguf/index.ts'

interface ExportGgufFlags {
  model: string
  out: string
  type: string
  idsOnly?: boolean
  force?: boolean
}

/** The export-gguf command. */
export const exportGgufCommand = new Command('export-gguf')
  .description("write a DeepSeek-V4 checkpoint as a GGUF for llama.cpp's deepseek4 (node-llama-cpp 3.22.1): its metadata keys and tensor names, the checkpoint's own tokenizer")
  .requiredOption('--model <dir>', 'checkpoint directory (config.json + safetensors, either naming)')
  .requiredOption('--out <file>', 'the .gguf file to write')
  .option('--type <type>', `type of the 2-D weights: ${GGUF_WEIGHT_TYPES.join(' | ')} (norms, biases and hyper-connection tensors stay f32)`, 'f32')
  .option('--ids-only', 'for a checkpoint without tokenizer.json: write a placeholder vocabulary (llama.cpp is then fed token ids and cannot tokenize text)')
  .option('--force', 'replace --out if it exists')
  .action(async (opts: ExportGgufFlags) => {
    const started = performance.now()
    if (!(GGUF_WEIGHT_TYPES as readonly string[]).includes(opts.type)) {
      throw new PdBridgeError(`--type: unknown ${JSON.stringify(opts.type)}, expected one of ${GGUF_WEIGHT_TYPES.join(', ')}`)
    }
    const made = await exportGguf({ model: opts.model, out: opts.out, type: opts.type as GgufWeightType, idsOnly: opts.idsOnly === true, force: opts.force === true })
    const seconds = (performance.now() - started) / 1000
    process.stdout.write(
      `wrote ${made.out}: deepseek4, ${made.tensors.length} tensors, ${made.metadata.length} metadata keys, ` +
      `weights ${opts.type}, vocabulary from ${made.vocabulary}, ${made.bytes} bytes, ${seconds.toFixed(1)} s\n`,
    )
  })

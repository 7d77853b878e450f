// Before llama.cpp loads a GGUF for a checkpoint's tokenizer and config: the file must be that
// model (architecture, vocabulary, layers, width), or the ids we tokenize mean something else there.
import { readGgufHeader, type GgufValue } from '../../../formats/gguf/index.ts'
import type { DeepseekV4Config } from '../../../model/config.ts'
import { DEEPSEEK4_ARCH } from '../../../model/gguf/index.ts'
import { PdBridgeError } from '../../../errors.ts'

function scalar (v: GgufValue | undefined): number | string | undefined {
  if (v === undefined || v.type === 'ARRAY' || v.type === 'BOOL') return undefined
  return typeof v.value === 'bigint' ? Number(v.value) : v.value
}

/** Throw one error listing every disagreement between `gguf` and `cfg` (from `modelDir`). */
export async function checkGgufMatchesConfig (gguf: string, cfg: DeepseekV4Config, modelDir: string): Promise<void> {
  const { metadata } = await readGgufHeader(gguf)
  const arch = scalar(metadata.get('general.architecture'))
  if (arch !== DEEPSEEK4_ARCH) {
    throw new PdBridgeError(`${gguf}: general.architecture is ${JSON.stringify(arch ?? null)}, not ${DEEPSEEK4_ARCH}; it is not a DeepSeek-V4 GGUF for ${modelDir}`)
  }
  const tokens = metadata.get('tokenizer.ggml.tokens')
  const vocab = tokens?.type === 'ARRAY' ? tokens.value.length : undefined
  const wrong: string[] = []
  const expect = (what: string, got: number | string | undefined, want: number): void => {
    if (got !== want) wrong.push(`${what} ${got ?? 'missing'} (config: ${want})`)
  }
  expect('vocabulary', vocab, cfg.vocabSize)
  expect(`${DEEPSEEK4_ARCH}.block_count`, scalar(metadata.get(`${DEEPSEEK4_ARCH}.block_count`)), cfg.numHiddenLayers)
  expect(`${DEEPSEEK4_ARCH}.embedding_length`, scalar(metadata.get(`${DEEPSEEK4_ARCH}.embedding_length`)), cfg.hiddenSize)
  if (wrong.length > 0) throw new PdBridgeError(`${gguf} does not match ${modelDir}/config.json: ${wrong.join(', ')}; export it from this checkpoint (pd-bridge export-gguf --model ${modelDir})`)
}

// The prefill engine's model and the decoder's sidecar must describe one geometry. The engine
// computes every attention input with its own rope tables and the hook pools with the sidecar's;
// if the two windows differ, captures are quietly wrong above the point where the tables diverge
// (the seed README's 2M-window bug). So the engine refuses to start unless they agree, comparing
// effective rope tables (fingerprints), not raw keys.
import type { SidecarJson } from '../../wire/sidecar-format.ts'
import { ConfigError } from '../../errors.ts'
import type { DeepseekV4Config } from '../../model/config.ts'
import { ropeFingerprint } from '../../model/rope.ts'

/**
 * Throw a ConfigError naming the first disagreement between the model (`cfg`, from `modelDir`) and
 * the sidecar: layer count, hidden size, per-layer type, sliding window, max_position_embeddings,
 * or the effective main / compress rope tables.
 */
export function checkSidecarAgreesWithModel (json: SidecarJson, cfg: DeepseekV4Config, sidecarFile: string, modelDir: string): void {
  const fail = (field: string, sidecarValue: unknown, modelValue: unknown, why = ''): never => {
    throw new ConfigError(field, `is ${String(sidecarValue)} in the sidecar but ${String(modelValue)} in the model ${modelDir}${why}`, sidecarFile)
  }
  if (json.layers.length !== cfg.numHiddenLayers) fail('layers', `${json.layers.length} layers`, `${cfg.numHiddenLayers}`)
  if (json.hiddenSize !== cfg.hiddenSize) fail('hiddenSize', json.hiddenSize, cfg.hiddenSize)
  json.layers.forEach((l, i) => {
    if (l.layerType !== cfg.layerTypes[i]) fail(`layers.${i}.layerType`, l.layerType, cfg.layerTypes[i])
  })
  if (json.slidingWindow !== cfg.slidingWindow) fail('slidingWindow', json.slidingWindow, cfg.slidingWindow)
  const window = '; the window lives in four places and they must agree (docs/prefill-engine.md)'
  if (json.maxPositionEmbeddings !== cfg.maxPositionEmbeddings) fail('maxPositionEmbeddings', json.maxPositionEmbeddings, cfg.maxPositionEmbeddings, window)
  const tables = [
    ['sliding_attention', cfg.rope.main],
    ['compressed_sparse_attention', cfg.rope.compress],
    ['heavily_compressed_attention', cfg.rope.compress],
  ] as const
  for (const [type, params] of tables) {
    const model = ropeFingerprint(params, cfg.maxPositionEmbeddings)
    if (json.ropeFingerprints[type] !== model) {
      fail(`ropeFingerprints.${type}`, `${json.ropeFingerprints[type]} (factor ${json.ropeParameters[type].factor})`, `${model} (factor ${params.factor})`, `: the effective rope tables differ${window}`)
    }
  }
}

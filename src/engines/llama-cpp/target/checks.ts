// Whether a capture computed under a sidecar may become llama.cpp sequence states for one context:
// the sidecar and the decoder's model config must describe the context's geometry (layer ratios,
// head sizes, window, vocabulary), and the sidecar's arithmetic must be the f32 profile (llama.cpp's
// F32 context computes in float32; an F16 cache gets those values rounded by the builder, exactly
// as llama.cpp rounds its own). Every difference is named, all at once.
import { PdBridgeError } from '../../../errors.ts'
import type { SidecarJson } from '../../../wire/sidecar-format.ts'
import type { DeepseekV4Config } from '../../../model/config.ts'
import { getProfile, profileFingerprint, type NumericsProfile } from '../../../model/profiles/index.ts'
import { stateGeometry, type LlamaCppStateGeometry } from '../state/geometry.ts'

/** The profile a capture for llama.cpp must be computed under. */
export const LLAMA_CPP_PROFILE = 'f32'

/** The sidecar fields the checks read. */
export type TargetSidecarJson = Pick<SidecarJson, 'profile' | 'layers' | 'headDim' | 'indexHeadDim' | 'slidingWindow' | 'blockSize'>

/** Thrown when a capture cannot go into a llama.cpp store; `differences` lists each mismatch. */
export class LlamaCppTargetError extends PdBridgeError {
  override name = 'LlamaCppTargetError'
  constructor (readonly differences: string[]) {
    super(`llama.cpp target refuses the capture: ${differences.join('; ')}`)
  }
}

function describeProfile (p: NumericsProfile): string {
  const weights = [...new Set(Object.values(p.weights))].join('/')
  const quant = Object.entries(p.referenceQuant).filter(([, on]) => on).map(([k]) => k)
  return `activations ${p.activations}, vectors ${p.vectors}, weights ${weights}${quant.length > 0 ? `, reference quant ${quant.join('+')}` : ''}`
}

/** The differences between a sidecar, the decoder's config and a context geometry (empty: compatible). */
export function targetDifferences (json: TargetSidecarJson, cfg: DeepseekV4Config, g: LlamaCppStateGeometry, blockSize: number): string[] {
  const out: string[] = []
  const want = getProfile(LLAMA_CPP_PROFILE)
  if (profileFingerprint(json.profile) !== profileFingerprint(want)) {
    out.push(`the sidecar's numerics profile is ${json.profile.name} (${describeProfile(json.profile)}), a llama.cpp ${g.cacheType} context needs the ${LLAMA_CPP_PROFILE} profile (${describeProfile(want)}): export the sidecar with --profile ${LLAMA_CPP_PROFILE}`)
  }
  const ratios = json.layers.map((l) => l.compressRatio)
  if (ratios.join(',') !== g.layerRatios.join(',')) out.push(`the sidecar's layer ratios are [${ratios.join(', ')}], the llama.cpp context's [${g.layerRatios.join(', ')}]`)
  const same: Array<[string, number, number]> = [
    ['head_dim', json.headDim, g.headDim],
    ['index_head_dim', json.indexHeadDim, g.indexHeadDim],
    ['sliding window', json.slidingWindow, g.slidingWindow],
    ['block size', json.blockSize, blockSize],
  ]
  for (const [field, ours, theirs] of same) {
    if (ours !== theirs) out.push(`the sidecar's ${field} is ${ours}, the llama.cpp ${field === 'block size' ? 'store\'s' : 'context\'s'} ${theirs}`)
  }
  // The model config builds the staging blocks and carries the vocabulary the sidecar does not.
  let fromCfg: LlamaCppStateGeometry | undefined
  try {
    fromCfg = stateGeometry(cfg, { kvCacheType: g.cacheType, flashAttention: g.vTrans === 0 })
  } catch (e) {
    out.push(`the decoder's model config has no llama.cpp geometry: ${e instanceof Error ? e.message : String(e)}`)
  }
  if (fromCfg !== undefined) {
    const fields: Array<[string, string, string]> = [
      ['vocab_size', String(fromCfg.vocabSize), String(g.vocabSize)],
      ['layer ratios', `[${fromCfg.layerRatios.join(', ')}]`, `[${g.layerRatios.join(', ')}]`],
      ['head_dim', String(fromCfg.headDim), String(g.headDim)],
      ['index_head_dim', String(fromCfg.indexHeadDim), String(g.indexHeadDim)],
      ['sliding window', String(fromCfg.slidingWindow), String(g.slidingWindow)],
    ]
    for (const [field, ours, theirs] of fields) {
      if (ours !== theirs) out.push(`the decoder's model config has ${field} ${ours}, the llama.cpp context ${theirs}`)
    }
  }
  return out
}

/** Throw a LlamaCppTargetError naming every difference, if there is one. */
export function checkLlamaCppTarget (json: TargetSidecarJson, cfg: DeepseekV4Config, g: LlamaCppStateGeometry, blockSize: number): void {
  const d = targetDifferences(json, cfg, g, blockSize)
  if (d.length > 0) throw new LlamaCppTargetError(d)
}

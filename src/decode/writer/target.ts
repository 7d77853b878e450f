// Where the writer puts blocks, and the check that a capture may go there: the capture's sidecar
// must describe exactly the decoder the store belongs to (same rope tables, window, layer pattern
// and numerics profile, so the same geometry fingerprint), with the store's block size. A
// DecoderPrefixCache is a target as it is (it has store, cfg and storage).
import { PdBridgeError } from '../../errors.ts'
import type { DeepseekV4Config } from '../../model/config.ts'
import type { BlockStore } from '../store/index.ts'
import { storageRuleFor, type StorageRule } from '../prefix-cache/index.ts'
import type { SidecarJson } from '../../wire/sidecar-format.ts'
import { Geometry } from '../../wire/geometry.ts'
import { checkBlockSize } from '../../wire/block-size.ts'

/** The decoder's block store with what the mapping needs: its model config and storage rule. */
export interface BlockTarget {
  store: BlockStore
  cfg: DeepseekV4Config
  /** How float32 arrays are stored in blocks (the decoder profile's rule). */
  storage: StorageRule
}

/** The sidecar fields the writer checks and uses. */
export type WriterSidecarJson = Pick<SidecarJson, 'profile' | 'ropeParameters' | 'maxPositionEmbeddings' | 'slidingWindow' | 'blockSize' | 'layers' | 'headDim' | 'indexHeadDim' | 'compressRates' | 'cacheMath'>

/**
 * Refuse a capture whose sidecar does not describe the target's decoder, naming what differs:
 * layer pattern, window, head sizes, block size, the geometry fingerprint (rope tables and profile)
 * and the storage rule. Every pool ratio must divide the block size (each block then adds the
 * same number of pooled rows, which the writer relies on).
 */
export function checkCaptureTarget (json: WriterSidecarJson, target: BlockTarget): void {
  const { cfg, store } = target
  const layout = store.layout
  const where = 'block writer: the capture\'s sidecar'
  if (json.layers.length !== cfg.numHiddenLayers) throw new PdBridgeError(`${where} has ${json.layers.length} layers, the decoder ${cfg.numHiddenLayers}`)
  json.layers.forEach((l, i) => {
    if (l.layerType !== cfg.layerTypes[i]) throw new PdBridgeError(`${where} says layer ${i} is ${l.layerType}, the decoder ${cfg.layerTypes[i]}`)
  })
  const same: Array<[string, number, number]> = [
    ['sliding window', json.slidingWindow, cfg.slidingWindow],
    ['head_dim', json.headDim, cfg.headDim],
    ['index_head_dim', json.indexHeadDim, cfg.indexHeadDim],
    ['block size', json.blockSize, layout.blockSize],
  ]
  for (const [field, ours, theirs] of same) {
    if (ours !== theirs) throw new PdBridgeError(`${where} has ${field} ${ours}, the decoder's store ${theirs}`)
  }
  const geometry = Geometry.fromSidecar(json).fingerprint
  if (geometry !== layout.geometryFingerprint) {
    throw new PdBridgeError(`${where} (profile ${json.profile.name}${json.cacheMath === undefined ? '' : `, cache math ${json.cacheMath.name}`}) gives geometry ${geometry}, the store's is ${layout.geometryFingerprint}: another rope table, window or profile; its blocks would never be served`)
  }
  const rule = storageRuleFor(json.profile)
  if (rule !== target.storage) throw new PdBridgeError(`${where}'s profile ${json.profile.name} stores blocks as ${rule}, the target as ${target.storage}`)
  checkBlockSize(layout.blockSize, json.layers.map((l) => l.compressRatio), 'block writer: the store\'s block size', 'the capture\'s sidecar')
}

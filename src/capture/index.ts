// The capture side of the bridge: the sidecar (export and load), the hook that turns attention
// inputs into the decoder's caches, capture sessions (layer files + manifest, memory budget),
// reading and mounting a capture, and the payload minimum. docs/capture.md describes all of it.
export { exportWeights, geometryJson, type ExportWeightsOptions } from './export-weights.ts'
export { loadSidecar, sidecarWeightSpecs, type Sidecar } from './sidecar.ts'
export {
  SIDECAR_FORMAT, SIDECAR_JSON, SIDECAR_WEIGHTS, parseSidecarJson, sidecarFingerprint, sidecarRope,
  type SidecarJson, type SidecarLayer,
} from './sidecar-format.ts'
export { kvWeightSpecs, type KvWeightSpec } from './kv-weights.ts'
export { buildKvPath, heldLinear, type KvPathModel } from './kv-path.ts'
export { PoolingHook, type PoolingHookOptions } from './hook.ts'
export {
  boundariesUpTo, boundaryPrefix, boundarySnapshotValues, boundaryTensors, layerSnapshotValues, takeBoundarySnapshot,
  type BoundarySnapshot, type PoolBoundary,
} from './boundary.ts'
export { CaptureSession, type CaptureSessionOptions, type CaptureReport } from './session.ts'
export { HELD_BYTES_PER_VALUE, heldBytes, roundPeak, sealPoint, type LiveLayer } from './budget.ts'
export { LAYER_FILE_FORMAT, decodeLayerFile, encodeLayerFile, layerFileTensors, parseLayerFileMeta, type DecodedLayerFile, type LayerFileMeta } from './layer-file.ts'
export { readCapture, type CaptureContents } from './read.ts'
export { mountCapture } from './mount.ts'
export { cacheGeometry, type CacheGeometry } from './cache-geometry.ts'
export { decoderBytesPerValue, layerGeometries, layerStateValues, payloadMinimum, type LayerGeometry, type PayloadMinimum, type PoolGeometry } from './payload.ts'
export type { CaptureManifest, CaptureRequest, CaptureState } from './manifest.ts'

// The capture side of the bridge: the sidecar (export and load), the hook that turns attention
// inputs into the decoder's caches, capture sessions (layer files + manifest, memory budget),
// reading and mounting a capture, and the payload minimum. docs/capture.md describes all of it.
// The formats it writes (manifest, layer file, boundary snapshot, sidecar.json) are the wire
// layer's: import them from src/wire/.
export { exportWeights, geometryJson, type ExportWeightsOptions } from './export-weights.ts'
export { loadSidecar, sidecarWeightSpecs, type Sidecar } from './sidecar.ts'
export { kvWeightSpecs, type KvWeightSpec } from './kv-weights.ts'
export { buildKvPath, heldLinear, type KvPathModel } from './kv-path.ts'
export { PoolingHook, type PoolingHookOptions } from './hook.ts'
export { boundariesUpTo, boundarySnapshotValues, layerSnapshotValues, takeBoundarySnapshot } from './boundary.ts'
export { CaptureSession, type CaptureSessionOptions, type CaptureReport } from './session.ts'
export { addLayerFile, finishManifest, startCapture, type CaptureStart, type FinishExtra } from './manifest-updates.ts'
export { HELD_BYTES_PER_VALUE, heldBytes, roundPeak, sealPoint, type LiveLayer } from './budget.ts'
export { readCapture, type CaptureContents } from './read.ts'
export { mountCapture } from './mount.ts'
export { cacheGeometry, type CacheGeometry } from './cache-geometry.ts'
export { decoderBytesPerValue, layerGeometries, layerStateValues, payloadMinimum, type LayerGeometry, type PayloadMinimum, type PoolGeometry } from './payload.ts'
export { SegmentPublisher, type SegmentPublisherOptions } from './segments.ts'

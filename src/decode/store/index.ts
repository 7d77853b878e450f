// The decoder's paged SSD prefix-cache block store (oMLX layout): one entry point.
export { BlockStoreError } from './errors.ts'
export { PyTuple, pyTuple, pythonRepr, pythonStr, pythonTruthy, type PyValue } from './python-repr.ts'
export { pythonJsonDumps, jsonEqual, type JsonValue } from '../../wire/python-json.ts'
export { ROOT_PARENT, computeBlockHash, blockKeyHex, blockKeyChain, isBlockKeyHex, tokenTupleText } from './block-key.ts'
export { PLACEHOLDER, plainState, cacheList, isTensor, isPoolingDelta, holdsPoolingDelta, type BlockPayload, type LayerPayload, type PlainState, type CacheListState, type Placeholder, type StateElement, type NestedElements } from './payload.ts'
export { encodeLayers, encodeShape, type EncodedLayers, type NamedTensor } from './encode.ts'
export { planLayers, materializeLayers, type LayerRef, type StateRef, type ElementRef } from './decode.ts'
export {
  FORMAT_VERSION_PLAIN, FORMAT_VERSION_POOLING_DELTA, READABLE_FORMAT_VERSIONS, DEFAULT_BLOCK_SIZE, DEFAULT_PAYLOAD_LAYOUT, META, INTEGRITY_REASONS,
  canonicalCacheTypes, compatSignature, signatureObject, blockMetadata, readBlockInfo, incompatibility, unauthenticated,
  type StoreLayout, type BlockInfo, type IncompatibleReason, type Incompatibility,
} from './metadata.ts'
export { SUBDIRS, BLOCK_FILE_NAME, TEMP_FILE_NAME, blockPath, readBlockHeader, readBlockFile, writeBlockFile, encodeBlockFile, writeEncodedBlockFile, listBlockDir, type BlockHeader, type EncodedBlock, type BlockContents, type DirEntry } from './block-file.ts'
export {
  ROTATING, POOLING, POOLING_DELTA, CACHE_LIST, POOLING_ARITY, POOLING_DELTA_ARITY, POOLING_DESCRIPTOR,
  deepseekV4CacheLayout, layoutCacheTypes, layoutCachelistSubtypes, deepseekV4StoreLayout, rotatingState, poolingDeltaRange,
  poolingFullState, poolingDeltaState, deepseekV4BlockPayload, restorePoolingChain, RestoreRejected,
  type LayerCacheSpec, type RotatingSnapshot, type PoolingSnapshot, type LayerSnapshot,
} from './deepseek-v4.ts'
export { restoreChain, SLICEABLE_CACHE_TYPES, type ChainBlock, type RestoredCache } from './restore.ts'
export { geometryFingerprint, deepseekV4GeometryFingerprint, type GeometryInputs } from '../../wire/geometry.ts'
export { QUARANTINE_DIR, quarantineFile, quarantineForeignGeometry, type QuarantineOptions, type QuarantineReport } from './quarantine.ts'
export { BlockStore, checkBlockPayload, writtenByOmlx, type BlockStoreOptions, type StoreEvent, type StoreStats, type ScanReport, type LoadedBlock, type PutResult, type RestoreResult } from './store.ts'
export { compareBlockDirs, compareBlockFiles, type VerifyReport, type BlockComparison } from './verify.ts'
export { surveyBlockDir, type Survey, type SurveyedBlock } from './survey.ts'
export { CONTENT_DIGEST_KEY, CONTENT_MAC_KEY, blockContentDigest, blockContentDigests, isContentDigest, macMatches, type BlockDigests, type DigestTensor } from './content-digest.ts'
export { verifyBlockFile, verifyBlockDir, type BlockVerification, type DirVerification } from './integrity.ts'
export { concatAlong, sliceAlong, int64Vector, readInt64Vector, rowAxis } from './tensor-ops.ts'
export { storeIdentity } from './store-identity.ts'

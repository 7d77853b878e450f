// The decoder's side of the block store: engine caches <-> oMLX-layout blocks, the decoder's
// prefix-cache logic, and the restored-vs-native comparison behind `pd-bridge diff-state`.
export { storageRuleFor, exactBf16Codes, storeF32, loadF32, type StorageRule } from './tensors.ts'
export { boundarySnapshots, cacheToBlockPayload, harmonizePoolDtypes, modelCacheFromRestored, restoreBlocks, restoreCache, type BlockPayloadOptions } from './mapping.ts'
export {
  DecoderPrefixCache,
  type PrefixCacheOptions, type LookupOptions, type PrefixCacheEvent, type PrefixCacheStats, type LookupResult, type StoredBlock, type PrefillAndStoreResult, type PrefillProgress, type PrefillSchedule, type WriteFailure,
} from './prefix-cache.ts'
export { compareCaches, describeComparison, parseTokenText, type ArrayComparison } from './diff-state.ts'

// The decoder's tokens per block, shared by the capture side (the sidecar records it) and the store.

/** DeepSeek-V4's block size in oMLX (window 128 plus pooling caches). */
export const DEFAULT_BLOCK_SIZE = 2048

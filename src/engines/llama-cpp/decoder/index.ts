// The llama.cpp decoder: node-llama-cpp behind the embedded decoder's HTTP layer, with a store of sequence states.
export { launchLlamaCppDecoder, type LlamaCppDecoderLaunchOptions, type LaunchedLlamaCppDecoder } from './launch.ts'
export { generateLlamaCpp, type LlamaCppGenerationContext } from './generate.ts'
export { llamaCppGeometryFingerprint } from './fingerprint.ts'
export { checkGgufMatchesConfig } from './gguf-check.ts'
export { LLAMA_CPP_DECODER_DEFAULTS, parseKvCacheType, resolveContext, type LlamaCppContextConfig } from './options.ts'
export { ServedStateStore, type ServedStateStoreOptions, type SaveResult } from './served-store.ts'
export { prefillFrom, restore, type PrefillResult } from './prefill.ts'
export { LlamaCppSequenceSampler, checkLlamaCppRequest, usesLlamaCppSampler } from './sampling.ts'

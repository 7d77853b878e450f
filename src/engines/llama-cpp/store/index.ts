// The llama.cpp decoder's store of sequence-state files keyed by the block-key chain.
export { LlamaCppStateStore, STATE_SUFFIX, type StateHit, type StateStoreOptions, type StateStoreStats } from './state-store.ts'

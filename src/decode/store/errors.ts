// The block store's error. The class lives in src/errors.ts so the wire layer (geometry fingerprint,
// Python-style JSON) can raise it without importing the store.
export { BlockStoreError } from '../../errors.ts'

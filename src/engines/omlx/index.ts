// The omlx decoder engine: oMLX (the reference system's decoder, on a Mac) as the decoder whose paged
// SSD cache the bridge writes into: its block size and its directory as our store. The kind's record,
// what the rest of the system asks (and the writer's target), is in src/decoders/omlx/ (docs/omlx.md).
import { checkOmlxBlockSize, omlxAlignedBlockSize } from './block-size.ts'
import { checkOmlxStoreOptions, openOmlxStore } from './store.ts'

export { OMLX_KIND } from './name.ts'
export { checkOmlxBlockSize, omlxAlignedBlockSize } from './block-size.ts'
export { checkOmlxStoreOptions, openOmlxStore, type OmlxBlocksRule, type OmlxStoreOptions } from './store.ts'
export { OMLX_ADAPTER_FILE } from './adapter-file.ts'

/** The engine's parts the kind's record (src/decoders/omlx/index.ts) and the harness use. */
export const omlxEngine = {
  /** oMLX's own block size for a model (its scheduler's window alignment). */
  blockSizeFor: (cfg: { slidingWindow: number }) => omlxAlignedBlockSize(cfg.slidingWindow),
  checkBlockSize: checkOmlxBlockSize,
  checkStoreOptions: checkOmlxStoreOptions,
  /** Our store over oMLX's directory (what serves a block oMLX wrote, with omlxBlocks: 'serve'). */
  openStore: openOmlxStore,
} as const

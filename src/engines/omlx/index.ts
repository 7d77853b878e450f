// The omlx decoder kind: oMLX (the reference system's decoder, on a Mac) as the decoder whose paged
// SSD cache the bridge writes into. One record, the kind's whole face to the rest of the system, in
// the shape the decoder-kind registry takes (docs/omlx.md): its name, config keys, how it runs, the
// target the writer writes through, the store that reads its directory, its cache arithmetic.
import { checkOmlxBlockSize, omlxAlignedBlockSize } from './block-size.ts'
import { OMLX_KIND } from './name.ts'
import { checkOmlxStoreOptions, openOmlxStore } from './store.ts'

export { OMLX_KIND } from './name.ts'
export { checkOmlxBlockSize, omlxAlignedBlockSize } from './block-size.ts'
export { checkOmlxStoreOptions, openOmlxStore, type OmlxBlocksRule, type OmlxStoreOptions } from './store.ts'
export { OMLX_ADAPTER_FILE } from './adapter-file.ts'

export const omlxKind = {
  name: OMLX_KIND,
  /** The config keys this kind reads (docs/configuration.md, docs/omlx.md). */
  configKeys: ['decoder.engine', 'decoder.url', 'decoder.model', 'decoder.modelName', 'decoder.cacheDir', 'decoder.blockSize', 'decoder.profile', 'decoder.omlxBlocks'],
  /** oMLX runs elsewhere (a Mac); pd-bridge never starts it. */
  launch: 'external',
  /** The cache arithmetic its blocks must be computed with: MLX's CPU rules (src/capture/mlx-cpu). */
  cacheMath: 'mlx-cpu',
  /** oMLX's own block size for a model (its scheduler's window alignment). */
  blockSizeFor: (cfg: { slidingWindow: number }) => omlxAlignedBlockSize(cfg.slidingWindow),
  checkBlockSize: checkOmlxBlockSize,
  checkStoreOptions: checkOmlxStoreOptions,
  /** Our store over oMLX's directory (what serves a block oMLX wrote, with omlxBlocks: 'serve'). */
  openStore: openOmlxStore,
} as const

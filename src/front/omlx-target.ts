// oMLX's cache directory as the front door's target: the bridge's streaming writer puts blocks there
// exactly as into our own decoder's store (same writer, same mapping, same checks), keyed by oMLX's
// model path. oMLX builds its index when it loads the model, so a block written later is found by a
// running oMLX only through the adapter (adapter/pd_bridge_omlx_index.py, docs/omlx.md) or after
// the model is reloaded; the front door's rescan call has nothing to reach on oMLX and is harmless.
import type { KeyObject } from 'node:crypto'
import type { FrontConfig } from '../config/index.ts'
import type { PrefixCacheEvent } from '../decode/prefix-cache/index.ts'
import { ConfigError } from '../errors.ts'
import type { DeepseekV4Config } from '../model/config.ts'
import { blockStoreTarget, type DecoderTarget } from './target.ts'
import { openOmlxStore, type OmlxStoreOptions } from '../engines/omlx/store.ts'

/** The writer's target in oMLX's directory; `builders`: the writer's builder threads (0: none). */
export async function omlxTarget (o: OmlxStoreOptions & { builders?: number }): Promise<DecoderTarget> {
  return blockStoreTarget(await openOmlxStore(o), { builders: o.builders ?? 0 })
}

/**
 * The target from a front door config with `decoder.engine: omlx`. The model name must be set: the
 * default (asked from the decoder) would be oMLX's model id, not the path its keys hash.
 */
export async function omlxTargetFromConfig (config: FrontConfig, cfg: DeepseekV4Config, log: (event: PrefixCacheEvent) => void, blockKey?: KeyObject): Promise<DecoderTarget> {
  const modelName = config.decoder.modelName
  if (modelName === undefined) throw new ConfigError('decoder.modelName', 'the omlx decoder needs it set (PD_MODEL_NAME): the model directory\'s full path on the Mac, which oMLX hashes into every block key')
  return await omlxTarget({
    cacheDir: config.decoder.cacheDir as string,
    modelName,
    cfg,
    profile: config.decoder.profile,
    blockSize: config.decoder.blockSize,
    omlxBlocks: config.decoder.omlxBlocks,
    builders: config.limits.writerBuilders,
    log,
    ...(blockKey !== undefined ? { authKey: blockKey } : {}),
  })
}

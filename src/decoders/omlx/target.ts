// oMLX's cache directory as the front door's target: the bridge's streaming writer puts blocks there
// exactly as into our own decoder's store (same writer, same mapping, same checks), keyed by oMLX's
// model path. oMLX builds its index when it loads the model, so a block written later is found by a
// running oMLX only through the adapter (adapter/pd_bridge_omlx_index.py, docs/omlx.md) or after
// the model is reloaded; the front door's rescan call has nothing to reach on oMLX and is harmless.
import { openOmlxStore, type OmlxStoreOptions } from '../../engines/omlx/index.ts'
import { blockStoreTarget } from '../ours/target.ts'
import type { DecoderTarget } from '../target.ts'

/** The writer's target in oMLX's directory; `builders`: the writer's builder threads (0: none). */
export async function omlxTarget (o: OmlxStoreOptions & { builders?: number }): Promise<DecoderTarget> {
  return blockStoreTarget(await openOmlxStore(o), { builders: o.builders ?? 0 })
}

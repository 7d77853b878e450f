// One block, from capture files to the bytes of its block file: read its state (block-state.ts),
// build the payload with the decoder's mapping, take the payload's fingerprint (what finalize
// checks the stored block against), check it fits the store's layout, and encode the file as the
// store would write it. Pure but for the reads, so a builder thread runs exactly what the writer's
// own thread would (build-worker.ts).
import type { KeyObject } from 'node:crypto'
import type { DeepseekV4Config } from '../../model/config.ts'
import { checkBlockPayload, encodeBlockFile, type EncodedBlock, type StoreLayout } from '../store/index.ts'
import type { StorageRule } from '../prefix-cache/index.ts'
import { blockCacheBytes, blockPayloadFromState, readBlockState } from './block-state.ts'
import type { LayerFileReader } from './capture-files.ts'
import { payloadDigest, payloadTensorBytes } from './digest.ts'
import { HeldBytes } from './held-bytes.ts'

/** What building one block gives. */
export interface BuiltBlock {
  block: number
  /** payloadDigest of what was built. */
  digest: string
  encoded: EncodedBlock
  /** The most bytes of block data the build held at once, the encoded file included. */
  peakHeldBytes: number
  readMs: number
  buildMs: number
}

/** What every block of one capture is built with. */
export interface BlockBuildContext {
  cfg: DeepseekV4Config
  layout: StoreLayout
  storage: StorageRule
  /** The store's block key: the encoded file carries its keyed digest (absent: none). */
  authKey?: KeyObject
  files: readonly LayerFileReader[]
}

/** Build block `k` (key `hash`, hung from `parentHash`) into the bytes of its block file. */
export async function buildEncodedBlock (ctx: BlockBuildContext, k: number, hash: string, parentHash: string | null): Promise<BuiltBlock> {
  const bs = ctx.layout.blockSize
  const held = new HeldBytes()
  let t = performance.now()
  const state = await readBlockState(ctx.cfg, ctx.files, k, bs, held)
  held.set('cache', blockCacheBytes(state))
  const readMs = performance.now() - t
  t = performance.now()
  const payload = blockPayloadFromState(ctx.cfg, state, k, bs, ctx.storage)
  checkBlockPayload(ctx.layout, hash, payload)
  const digest = payloadDigest(payload)
  const encoded = encodeBlockFile(ctx.layout, hash, payload, Date.now() / 1000, parentHash, ctx.authKey)
  held.set('payload', payloadTensorBytes(payload) + encoded.bytes.byteLength)
  return { block: k, digest, encoded, peakHeldBytes: held.peak, readMs, buildMs: performance.now() - t }
}

// The product's bridge path into an oMLX cache directory, as the front door runs it for one prompt
// (src/front/bridge.ts): the capture hook (CaptureSession under the sidecar, whose cache math is
// `decoder` or `mlx-cpu`) over the usable full blocks' tokens, then the omlx kind's target
// (openWriter, writeNext, finalize). Where the attention inputs come from is the prefill engine's
// part: our engine's live forward under the sidecar's profile, or the rows oMLX's own model computed
// in its block-by-block prefill (omlx_prefix_cache.py --save-attn-inputs), fed to the hook chunk by
// chunk as an engine does. Shared by harness/mlx/product-blocks.ts and suites/mlx/product-bridge-blocks.test.ts.
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { CaptureSession, type Sidecar } from '../../src/capture/index.ts'
import { omlxTarget } from '../../src/decoders/omlx/target.ts'
import type { Tensor } from '../../src/formats/safetensors/index.ts'
import type { DeepseekV4Config } from '../../src/model/config.ts'
import type { DeepseekV4Engine } from '../../src/model/engine/index.ts'
import { usableBlocks } from '../../src/front/routing.ts'
import { mlxAttnInput } from './mlx-cpu-block.ts'

/** Where the hook's attention inputs come from. */
export type AttentionSource =
  | { engine: DeepseekV4Engine }
  | { recorded: Map<string, Tensor>, chunk: number }

export interface ProductBlocksOptions {
  cfg: DeepseekV4Config
  sidecar: Sidecar
  /** The whole prompt; the front door captures its usable full blocks only. */
  tokens: number[]
  blockSize: number
  modelName: string
  source: AttentionSource
  /** Scratch for the capture (`<workDir>/captures`) and oMLX's directory (`<workDir>/omlx-store`). */
  workDir: string
}

export interface ProductBlocks { store: string, captureTokens: number[], blocks: number, written: number }

export async function writeProductBlocks (o: ProductBlocksOptions): Promise<ProductBlocks> {
  const captureTokens = o.tokens.slice(0, usableBlocks(o.tokens.length, o.blockSize) * o.blockSize)
  if (captureTokens.length === 0) throw new Error(`product-bridge: a ${o.tokens.length}-token prompt holds no usable block of ${o.blockSize}`)
  const captures = join(o.workDir, 'captures')
  const store = join(o.workDir, 'omlx-store')
  mkdirSync(captures, { recursive: true })
  mkdirSync(store, { recursive: true })
  const session = await CaptureSession.start({ sidecar: o.sidecar, captureRoot: captures, requestId: 'product-bridge', tokenCount: captureTokens.length, tokens: captureTokens })
  if ('engine' in o.source) {
    o.source.engine.prefill(captureTokens, o.source.engine.newCache(), { logits: 'none', attnInputHook: session.onAttentionInput, maxChunk: captureTokens.length })
  } else {
    feedRecorded(session, o.cfg, o.source.recorded, captureTokens.length, o.source.chunk)
  }
  await session.finish()
  // The store's geometry records the sidecar's cache math, as the front door's setup opens it.
  const cacheMath = o.sidecar.json.cacheMath
  const target = await omlxTarget({
    cacheDir: store, modelName: o.modelName, cfg: o.cfg, profile: o.sidecar.profile.name, blockSize: o.blockSize, log: () => {},
    ...(cacheMath !== undefined ? { cacheMath } : {}),
  })
  target.checkSidecar(o.sidecar.json)
  const writer = await target.openWriter(session.dir, { sidecar: o.sidecar, requestId: 'product-bridge', tokens: captureTokens })
  while (await writer.writeNext() !== null) { /* one block per step */ }
  const report = await writer.finalize()
  return { store, captureTokens, blocks: report.blocks, written: report.written }
}

/** MLX's rows, in the order an engine calls the hook: chunk by chunk, layer by layer within a chunk. */
function feedRecorded (session: CaptureSession, cfg: DeepseekV4Config, recorded: Map<string, Tensor>, rows: number, chunk: number): void {
  const inputs = Array.from({ length: cfg.numHiddenLayers }, (_, layer) => mlxAttnInput(recorded, cfg, layer, rows, 'prefill'))
  const h = cfg.hiddenSize
  for (let start = 0; start < rows; start += chunk) {
    const count = Math.min(chunk, rows - start)
    inputs.forEach((x, layer) => { session.onAttentionInput(layer, start, x.subarray(start * h, (start + count) * h), count) })
  }
}

// The product's bridge path into an oMLX cache directory, for harness/mlx/make-product-bridge-proof.sh
// (harness/mlx/product-bridge.ts: the capture hook under the sidecar, then the front door's omlx
// target). The prefill engine's part, the attention inputs: without --attn-inputs a live prefill of
// our engine under the sidecar's profile; with --attn-inputs FILE the rows oMLX's own model computed in
// its block-by-block prefill (omlx_prefix_cache.py --save-attn-inputs), fed to the hook block by block.
// In process: no decoder link is needed to write blocks (the front door's pre-flight would want oMLX's
// server, which is not run here; oMLX's own prefix-cache code restores the store after).
//   npx tsx harness/mlx/product-blocks.ts --ckpt DIR --sidecar DIR --tokens FILE [--take N] [--attn-inputs FILE] \
//       --block-size N --model-name NAME --out DIR
// DIR/omlx-store is the oMLX cache directory; DIR/index.json lists the blocks in chain order.
import { readFileSync, writeFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { parseArgs } from 'node:util'
import { loadSidecar } from '../../src/capture/index.ts'
import { blockPath, blockKeyChain } from '../../src/decode/store/index.ts'
import { readSafetensors, viewAs } from '../../src/formats/safetensors/index.ts'
import { checkpointDigest } from '../../src/model/checkpoint/index.ts'
import { loadDeepseekV4Config } from '../../src/model/config.ts'
import { DeepseekV4Engine } from '../../src/model/engine/index.ts'
import { writeProductBlocks, type AttentionSource } from './product-bridge.ts'

const { values: o } = parseArgs({ options: { ckpt: { type: 'string' }, sidecar: { type: 'string' }, tokens: { type: 'string' }, take: { type: 'string' }, 'attn-inputs': { type: 'string' }, 'block-size': { type: 'string' }, 'model-name': { type: 'string' }, out: { type: 'string' } } })
for (const k of ['ckpt', 'sidecar', 'tokens', 'block-size', 'model-name', 'out'] as const) if (o[k] === undefined) throw new Error(`product-blocks: --${k} is required`)
const parsed = JSON.parse(readFileSync(o.tokens!, 'utf8')) as number[] | { ids: number[] }
const all = Array.isArray(parsed) ? parsed : parsed.ids
const tokens = o.take === undefined ? all : all.slice(0, Number(o.take))
const blockSize = Number(o['block-size'])
const sidecar = await loadSidecar(o.sidecar!)
const cfg = await loadDeepseekV4Config(o.ckpt!)
let source: AttentionSource
if (o['attn-inputs'] === undefined) {
  source = { engine: await DeepseekV4Engine.load(o.ckpt!, sidecar.profile.name) }
} else {
  const rec = await readSafetensors(o['attn-inputs'])
  if (rec.metadata.checkpoint_sha256 !== await checkpointDigest(o.ckpt!)) throw new Error('product-blocks: --attn-inputs were recorded on another checkpoint')
  const ids = Array.from(viewAs(rec.tensors.get('input_ids')!, 'I32'), Number)
  if (ids.some((t, i) => t !== tokens[i])) throw new Error('product-blocks: --attn-inputs were recorded for another prompt')
  source = { recorded: rec.tensors, chunk: blockSize }
}
const r = await writeProductBlocks({ cfg, sidecar, tokens, blockSize, modelName: o['model-name']!, source, workDir: o.out! })
const keys = blockKeyChain(o['model-name']!, r.captureTokens, blockSize)
writeFileSync(join(o.out!, 'index.json'), JSON.stringify({
  producer: 'harness/mlx/product-blocks.ts', profile: sidecar.profile.name, cache_math: sidecar.json.cacheMath?.name ?? 'decoder',
  attention_inputs: 'engine' in source ? `pd-bridge engine (${sidecar.profile.name})` : 'MLX (oMLX\'s model, its block-by-block prefill)',
  block_size: blockSize, tokens, blocks_written: r.written, blocks: keys.map((k) => relative(o.out!, blockPath(r.store, k))),
}, null, 1) + '\n')
console.log(`product-blocks: ${r.blocks} blocks (${r.written} written) of ${blockSize} tokens for a ${tokens.length}-token prompt under ${r.store}`)

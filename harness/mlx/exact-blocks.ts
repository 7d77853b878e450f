// Step 2 of the exact-restore proof (harness/mlx/make-exact-restore-proof.sh): each layer's cache at
// B computed by the mlx-cpu cache path (src/capture/mlx-cpu) from the attention inputs MLX recorded
// in a one-shot prefill of B tokens (harness/mlx/omlx_exact_native.py), placed into a ModelCache,
// turned into block 0 by the bridge's own mapping (cacheToBlockPayload, storage bf16-if-exact) and
// written by the store, with the index.json harness/mlx/write-blocks.ts writes.
//   npx tsx harness/mlx/exact-blocks.ts --ckpt DIR --native native.safetensors --weights cache-weights.safetensors \
//       --tokens tokens-301.json --block-size 256 --out DIR
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { parseArgs } from 'node:util'
import { readMlxCpuCacheWeights } from '../../src/capture/mlx-cpu/index.ts'
import { readSafetensors, viewAs } from '../../src/formats/safetensors/index.ts'
import { loadDeepseekV4Config } from '../../src/model/config.ts'
import { DecoderPrefixCache, cacheToBlockPayload, type StorageRule } from '../../src/decode/prefix-cache/index.ts'
import { blockPath } from '../../src/decode/store/index.ts'
import { mlxCpuBlockCache, mlxAttnInput } from './mlx-cpu-block.ts'

const { values: o } = parseArgs({ options: { ckpt: { type: 'string' }, native: { type: 'string' }, weights: { type: 'string' }, tokens: { type: 'string' }, 'block-size': { type: 'string' }, 'model-name': { type: 'string' }, profile: { type: 'string' }, out: { type: 'string' } } })
if (o.ckpt === undefined || o.native === undefined || o.weights === undefined || o.tokens === undefined || o.out === undefined) {
  throw new Error('exact-blocks: --ckpt, --native, --weights, --tokens and --out are required')
}
const B = Number(o['block-size'] ?? 256)
const STORAGE: StorageRule = 'bf16-if-exact'
const profileName = o.profile ?? 'decoder'
const parsed = JSON.parse(readFileSync(o.tokens, 'utf8')) as number[] | { ids: number[] }
const tokens = Array.isArray(parsed) ? parsed : parsed.ids

const cfg = await loadDeepseekV4Config(o.ckpt)
const weights = await readMlxCpuCacheWeights(o.weights)
const native = await readSafetensors(o.native)
if (weights.metadata.checkpoint_sha256 !== native.metadata.checkpoint_sha256) throw new Error('exact-blocks: weights and attention inputs come from different checkpoints')
const ids = Array.from(viewAs(native.tensors.get('input_ids')!, 'I32'), Number)
if (ids.length !== tokens.length || ids.some((t, i) => t !== tokens[i])) throw new Error('exact-blocks: the native run\'s prompt is not --tokens')

const cache = mlxCpuBlockCache(cfg, weights, (layer) => mlxAttnInput(native.tensors, cfg, layer, B), B)

const payload = cacheToBlockPayload(cfg, cache, 0, B, { storage: STORAGE })
const root = join(o.out, 'store')
mkdirSync(root, { recursive: true })
const pc = await DecoderPrefixCache.open({ storeRoot: root, modelName: o['model-name'] ?? o.ckpt, cfg, profile: profileName, blockSize: B, log: () => {} })
const keys = pc.store.keysFor(tokens)
if (keys.length < 1) throw new Error('exact-blocks: the prompt holds no full block')
const put = await pc.store.put(keys[0], payload)
writeFileSync(join(o.out, 'index.json'), JSON.stringify({
  producer: 'harness/mlx/exact-blocks.ts', checkpoint: o.ckpt, profile: pc.profile.name, block_size: B,
  storage: STORAGE, cache_source: 'src/capture/mlx-cpu mlxCpuLayerCache over MLX one-shot attention inputs',
  tokens, blocks: [relative(o.out, blockPath(root, keys[0]))],
}, null, 1) + '\n')
console.log(`exact-blocks: block 0 (${put.bytes} bytes, written ${String(put.written)}) under ${root}, storage ${STORAGE}`)

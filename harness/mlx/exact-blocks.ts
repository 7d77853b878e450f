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
import { mlxCpuCacheConfig, mlxCpuLayerCache, readMlxCpuCacheWeights, type MlxCpuPoolState } from '../../src/capture/mlx-cpu/index.ts'
import { readSafetensors, viewAs } from '../../src/formats/safetensors/index.ts'
import { loadDeepseekV4Config } from '../../src/model/config.ts'
import { ModelCache, type CompressorState } from '../../src/model/engine/index.ts'
import { decodeBf16 } from '../../src/numerics/bf16.ts'
import { DecoderPrefixCache, cacheToBlockPayload, type StorageRule } from '../../src/decode/prefix-cache/index.ts'
import { blockPath } from '../../src/decode/store/index.ts'

const { values: o } = parseArgs({ options: { ckpt: { type: 'string' }, native: { type: 'string' }, weights: { type: 'string' }, tokens: { type: 'string' }, 'block-size': { type: 'string' }, profile: { type: 'string' }, out: { type: 'string' } } })
if (o.ckpt === undefined || o.native === undefined || o.weights === undefined || o.tokens === undefined || o.out === undefined) {
  throw new Error('exact-blocks: --ckpt, --native, --weights, --tokens and --out are required')
}
const B = Number(o['block-size'] ?? 256)
const STORAGE: StorageRule = 'bf16-if-exact'
const profileName = o.profile ?? 'decoder'
const parsed = JSON.parse(readFileSync(o.tokens, 'utf8')) as number[] | { ids: number[] }
const tokens = Array.isArray(parsed) ? parsed : parsed.ids

const cfg = await loadDeepseekV4Config(o.ckpt)
const mcfg = mlxCpuCacheConfig(cfg)
const weights = await readMlxCpuCacheWeights(o.weights)
const native = await readSafetensors(o.native)
if (weights.metadata.checkpoint_sha256 !== native.metadata.checkpoint_sha256) throw new Error('exact-blocks: weights and attention inputs come from different checkpoints')
const ids = Array.from(viewAs(native.tensors.get('input_ids')!, 'I32'), Number)
if (ids.length !== tokens.length || ids.some((t, i) => t !== tokens[i])) throw new Error('exact-blocks: the native run\'s prompt is not --tokens')

function attnInput (layer: number): Float32Array {
  const t = native.tensors.get(`oneshot.layers.${layer}.attn_input`)
  if (t === undefined) throw new Error(`exact-blocks: no attention input for layer ${layer}`)
  if (t.dtype !== 'BF16' || t.shape[0] !== B || t.shape[1] !== cfg.hiddenSize) throw new Error(`exact-blocks: layer ${layer} attention input is ${t.dtype} [${t.shape}], expected BF16 [${B}, ${cfg.hiddenSize}]`)
  return decodeBf16(viewAs(t, 'BF16'))
}

function fill (state: CompressorState, p: MlxCpuPoolState, where: string): void {
  if (state.ratio !== p.ratio || state.dim !== p.dim || state.width !== p.width) throw new Error(`${where}: ours ratio ${state.ratio} dim ${state.dim} width ${state.width}, mlx-cpu ${p.ratio}/${p.dim}/${p.width}`)
  const entries = p.pooled === null ? 0 : p.pooled.length / p.dim
  for (let r = 0; r < entries; r++) state.entries.append(p.pooled!.subarray(r * p.dim, (r + 1) * p.dim))
  const n = p.bufKv === null ? 0 : p.bufKv.length / p.width
  if (n > 0) { state.bufferKv.set(p.bufKv!); state.bufferGate.set(p.bufGate!) }
  state.bufferLength = n
  state.prevWindowKv = p.prevWinKv === null ? null : p.prevWinKv.slice()
  state.prevWindowGate = p.prevWinGate === null ? null : p.prevWinGate.slice()
  // overlapKv / overlapGate (the engine's derived carry) stay null: the block stores the raw window.
}

const cache = ModelCache.empty(cfg)
cache.tokenCount = B
cache.layers.forEach((layer, i) => {
  const c = mlxCpuLayerCache(weights, mcfg, i, attnInput(i), B)
  const d = layer.headDim
  const keep = Math.min(c.windowRows, layer.windowRowsMax)
  layer.window.set(c.window.subarray((c.windowRows - keep) * d))
  layer.windowLength = keep
  const states = [layer.compressor, layer.indexer].filter((s): s is CompressorState => s !== null)
  if (states.length !== c.pools.length) throw new Error(`layer ${i}: ${states.length} compressors in our cache, ${c.pools.length} mlx-cpu pools`)
  states.forEach((s, j) => fill(s, c.pools[j], `layer ${i} pool ${j}`))
})

const payload = cacheToBlockPayload(cfg, cache, 0, B, { storage: STORAGE })
const root = join(o.out, 'store')
mkdirSync(root, { recursive: true })
const pc = await DecoderPrefixCache.open({ storeRoot: root, modelName: o.ckpt, cfg, profile: profileName, blockSize: B, log: () => {} })
const keys = pc.store.keysFor(tokens)
if (keys.length < 1) throw new Error('exact-blocks: the prompt holds no full block')
const put = await pc.store.put(keys[0], payload)
writeFileSync(join(o.out, 'index.json'), JSON.stringify({
  producer: 'harness/mlx/exact-blocks.ts', checkpoint: o.ckpt, profile: pc.profile.name, block_size: B,
  storage: STORAGE, cache_source: 'src/capture/mlx-cpu mlxCpuLayerCache over MLX one-shot attention inputs',
  tokens, blocks: [relative(o.out, blockPath(root, keys[0]))],
}, null, 1) + '\n')
console.log(`exact-blocks: block 0 (${put.bytes} bytes, written ${String(put.written)}) under ${root}, storage ${STORAGE}`)

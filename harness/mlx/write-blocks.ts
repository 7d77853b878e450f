// Writes a block store the way the decoder's prefix cache does (the bridge's writer produces the
// same bytes: suites/blocks-bridge), for harness/mlx/omlx_restore.py to restore into oMLX's model.
//   npx tsx harness/mlx/write-blocks.ts --ckpt DIR --tokens FILE [--take N] --profile f32 --block-size 256 [--model-name NAME] --out DIR
// NAME is the model name the block keys hash (oMLX's model_name); the checkpoint path by default.
// DIR/index.json lists the prompt, block size and the block files in chain order.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { parseArgs } from 'node:util'
import { blockPath } from '../../src/decode/store/index.ts'
import { DecoderPrefixCache } from '../../src/decode/prefix-cache/index.ts'
import { DeepseekV4Engine } from '../../src/model/engine/index.ts'

const { values: o } = parseArgs({ options: { ckpt: { type: 'string' }, tokens: { type: 'string' }, take: { type: 'string' }, profile: { type: 'string' }, 'block-size': { type: 'string' }, 'model-name': { type: 'string' }, out: { type: 'string' } } })
if (o.ckpt === undefined || o.tokens === undefined || o.out === undefined) throw new Error('write-blocks: --ckpt, --tokens and --out are required')
const parsed = JSON.parse(readFileSync(o.tokens, 'utf8')) as number[] | { ids: number[] }
const all = Array.isArray(parsed) ? parsed : parsed.ids
const tokens = o.take === undefined ? all : all.slice(0, Number(o.take))
const blockSize = Number(o['block-size'] ?? 256)
const engine = await DeepseekV4Engine.load(o.ckpt, o.profile ?? 'f32')
const root = join(o.out, 'store')
mkdirSync(root, { recursive: true })
const pc = await DecoderPrefixCache.open({ storeRoot: root, modelName: o['model-name'] ?? o.ckpt, cfg: engine.config, profile: engine.profile, blockSize, engine, log: () => {} })
await pc.prefillAndStore(engine, tokens)
const keys = pc.store.keysFor(tokens)
writeFileSync(join(o.out, 'index.json'), JSON.stringify({
  producer: 'harness/mlx/write-blocks.ts', checkpoint: o.ckpt, profile: engine.profile.name, block_size: blockSize,
  tokens, blocks: keys.map((k) => relative(o.out!, blockPath(root, k))),
}, null, 1) + '\n')
console.log(`wrote ${keys.length} blocks of ${blockSize} tokens for a ${tokens.length}-token prompt under ${root}`)

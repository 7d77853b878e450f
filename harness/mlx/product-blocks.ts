// The product's bridge path into an oMLX cache directory, for harness/mlx/make-product-bridge-proof.sh:
// a live prefill of our prefill engine under the sidecar's profile with the capture hook (what the
// prefill engine runs for a request), then the front door's omlx target (src/engines/omlx, as
// setup.ts opens it for decoder.engine omlx) writes the capture's blocks: openWriter, writeNext,
// finalize. In process: no decoder link is needed to write blocks (the front door's pre-flight would
// want oMLX's server, which is not run here; oMLX's own prefix-cache code restores the store after).
//   npx tsx harness/mlx/product-blocks.ts --ckpt DIR --sidecar DIR --tokens FILE [--take N] --block-size N --model-name NAME --out DIR
// DIR/omlx-store is the oMLX cache directory; DIR/index.json lists the blocks in chain order.
import { omlxTarget } from '../../src/front/omlx-target.ts'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { parseArgs } from 'node:util'
import { CaptureSession, loadSidecar } from '../../src/capture/index.ts'
import { blockPath, blockKeyChain } from '../../src/decode/store/index.ts'
import { DeepseekV4Engine } from '../../src/model/engine/index.ts'

const { values: o } = parseArgs({ options: { ckpt: { type: 'string' }, sidecar: { type: 'string' }, tokens: { type: 'string' }, take: { type: 'string' }, 'block-size': { type: 'string' }, 'model-name': { type: 'string' }, out: { type: 'string' } } })
for (const k of ['ckpt', 'sidecar', 'tokens', 'block-size', 'model-name', 'out'] as const) if (o[k] === undefined) throw new Error(`product-blocks: --${k} is required`)
const parsed = JSON.parse(readFileSync(o.tokens!, 'utf8')) as number[] | { ids: number[] }
const all = Array.isArray(parsed) ? parsed : parsed.ids
const tokens = o.take === undefined ? all : all.slice(0, Number(o.take))
const blockSize = Number(o['block-size'])
const sidecar = await loadSidecar(o.sidecar!)
const engine = await DeepseekV4Engine.load(o.ckpt!, sidecar.profile.name)
const captures = join(o.out!, 'captures')
const store = join(o.out!, 'omlx-store')
mkdirSync(captures, { recursive: true })
mkdirSync(store, { recursive: true })
const session = await CaptureSession.start({ sidecar, captureRoot: captures, requestId: 'product-bridge', tokenCount: tokens.length, tokens })
engine.prefill(tokens, engine.newCache(), { logits: 'none', attnInputHook: session.onAttentionInput, maxChunk: tokens.length })
await session.finish()
const target = await omlxTarget({ cacheDir: store, modelName: o['model-name']!, cfg: engine.config, profile: sidecar.profile.name, blockSize })
target.checkSidecar(sidecar.json)
const writer = await target.openWriter(session.dir, { sidecar, requestId: 'product-bridge', tokens })
while (await writer.writeNext() !== null) { /* one block per step */ }
const report = await writer.finalize()
const keys = blockKeyChain(o['model-name']!, tokens, blockSize)
writeFileSync(join(o.out!, 'index.json'), JSON.stringify({
  producer: 'harness/mlx/product-blocks.ts', profile: sidecar.profile.name, block_size: blockSize, tokens,
  blocks_written: report.written, blocks: keys.map((k) => relative(o.out!, blockPath(store, k))),
}, null, 1) + '\n')
console.log(`product-blocks: ${report.blocks} blocks (${report.written} written) of ${blockSize} tokens for a ${tokens.length}-token prompt under ${store}`)

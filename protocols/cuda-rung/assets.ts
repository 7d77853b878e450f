// The embedded stack's checkpoint and sidecar for a preset, made (or reused) where the stack would
// make them, so the hook comparison and the benchmark share one checkpoint. Prints {model, sidecar}.
//
//   npx tsx protocols/cuda-rung/assets.ts --state-dir DIR --preset NAME [--block-size 256]
import { parseArgs } from 'node:util'
import { isPresetName } from '../../src/model/checkpoint/index.ts'
import { ensureCheckpoint, ensureSidecar } from '../../src/stack/assets.ts'
import { EMBEDDED_DECODER_PROFILE, EMBEDDED_DEFAULTS } from '../../src/stack/embedded.ts'
import { stackPaths } from '../../src/stack/state-dir.ts'

const { values } = parseArgs({ options: { 'state-dir': { type: 'string' }, preset: { type: 'string' }, 'block-size': { type: 'string' } } })
const preset = values.preset ?? ''
if (values['state-dir'] === undefined || !isPresetName(preset)) {
  process.stderr.write('usage: assets.ts --state-dir DIR --preset NAME [--block-size N]\n')
  process.exit(2)
}
const blockSize = Number(values['block-size'] ?? EMBEDDED_DEFAULTS.blockSize)
const paths = stackPaths(values['state-dir'], preset, EMBEDDED_DEFAULTS.seed, EMBEDDED_DECODER_PROFILE, blockSize)
const started = performance.now()
const checkpoint = await ensureCheckpoint(paths.model, preset, EMBEDDED_DEFAULTS.seed)
const sidecar = await ensureSidecar(paths.sidecar, checkpoint, EMBEDDED_DECODER_PROFILE, blockSize)
console.log(JSON.stringify({ model: checkpoint.dir, sidecar: sidecar.dir, made: checkpoint.made || sidecar.made, seconds: (performance.now() - started) / 1000 }))

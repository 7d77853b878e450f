// Writes harness/fixtures/mlx/summary.json from the comparison itself: every MLX reference case run
// through our engine (harness/mlx/mlx-fixture.ts), per case the tensors compared, how many are
// bit-identical, the fraction of identical elements and the worst ulp. Never edited by hand.
//   npx tsx harness/mlx/summarize.ts --tiny DIR --flash DIR --hf-saved DIR [--fixtures DIR] --out FILE
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { loadCheckpoint } from '../../src/model/checkpoint/index.ts'
import { DeepseekV4Engine } from '../../src/model/engine/index.ts'
import { combine } from './distance.ts'
import { readMlxFixture, runCase } from './mlx-fixture.ts'
import { compareBlocks, identical, omlxBlocks, readBlock, readProof, writeF32Blocks, writeMlxCpuBlock } from './compare-blocks.ts'

const { values: opts } = parseArgs({
  options: {
    tiny: { type: 'string' }, flash: { type: 'string' }, 'hf-saved': { type: 'string' },
    out: { type: 'string' }, fixtures: { type: 'string' },
  },
})
for (const k of ['tiny', 'flash', 'hf-saved', 'out'] as const) if (opts[k] === undefined) throw new Error(`summarize: --${k} is required`)
const dirs: Record<string, string> = { tiny: opts.tiny!, flash: opts.flash!, hfsaved: opts['hf-saved']! }
const CASES: Array<[string, string]> = [
  ['tiny-t301-f32', 'f32'], ['tiny-t1020-f32', 'f32'], ['hfsaved-t777-f32', 'f32'], ['flash-t301-f32', 'f32'],
  ['tiny-t301-mxq', 'decoder'], ['flash-t301-mxq', 'decoder'],
]

const here = new URL('.', import.meta.url).pathname
const manifest = JSON.parse(readFileSync(`${here}omlx-files.json`, 'utf8')) as { files: Array<{ path: string, commit: string, repo: string }> }
const model = manifest.files.find((f) => f.path.endsWith('deepseek_v4_model.py'))!
const cacheManifest = JSON.parse(readFileSync(`${here}omlx-cache-files.json`, 'utf8')) as { files: Array<{ path: string, commit: string, repo: string, via: string }> }
const cases = []
let mlx = { version: '', commit: '' }
let mlxLm = ''
for (const [name, profile] of CASES) {
  const fx = await readMlxFixture(name)
  mlx = { version: fx.metadata.mlx_version, commit: fx.metadata.mlx_commit }
  mlxLm = fx.metadata.mlx_lm_commit
  const dir = dirs[name.split('-')[0]]
  const engine = DeepseekV4Engine.fromCheckpoint(await loadCheckpoint(dir), profile)
  const run = runCase(fx, engine)
  const all = combine(run.distances.map((d) => d.distance))
  cases.push({
    case: name, checkpoint: fx.metadata.checkpoint_sha256, tokens: Number(fx.metadata.tokens), chunks: fx.chunks,
    mlx_dtype: fx.dtype, mlx_quantized: fx.quantized, profile,
    tensors: run.distances.length,
    bit_identical_tensors: run.distances.filter((d) => d.distance.identical === d.distance.elements).length,
    elements_identical_fraction: all.identicalFraction,
    max_ulp: all.maxUlp,
    max_rel_error: all.relError,
    greedy_equal: JSON.stringify(run.greedy) === JSON.stringify(fx.greedy),
  })
  console.log(`${name}: ${run.distances.length} tensors, identical elements ${(100 * all.identicalFraction).toFixed(2)}%, worst rel ${all.relError.toExponential(2)}`)
}
// Blocks: ours written again (harness/mlx/compare-blocks.ts) against the ones oMLX's own prefix cache
// wrote (harness/fixtures/mlx/omlx-blocks/), and what oMLX's model and prefix cache did with ours.
const fixtures = opts.fixtures ?? new URL('../fixtures/mlx/', import.meta.url).pathname
const fxRoot = join(fixtures, '..')
const proof = (name: string) => JSON.parse(readFileSync(`${fixtures}/${name}`, 'utf8')) as Record<string, unknown>
const exact = proof('exact-restore-proof.json')
const f32 = proof('restore-proof.json')
const noisy = proof('restore-proof-noisy-first-row.json')
const prefixProof = readProof(fxRoot)
const scratch = mkdtempSync(join(tmpdir(), 'pd-summarize-'))
const tinyCkpt = await loadCheckpoint(dirs.tiny)
const mxqCase = prefixProof.cases['tiny-t301-mxq']
const f32Case = prefixProof.cases['tiny-t777-f32']
const ourMxq = await writeMlxCpuBlock(fxRoot, tinyCkpt.config, join(scratch, 'mlx-cpu'), mxqCase)
const omlxMxq = await omlxBlocks(fxRoot, 'tiny-t301-mxq')
const mxqCmp = [compareBlocks(await readBlock(ourMxq.path), omlxMxq.get(ourMxq.hash)!)]
const ourF32 = await writeF32Blocks(fxRoot, DeepseekV4Engine.fromCheckpoint(tinyCkpt, 'f32'), join(scratch, 'f32'), f32Case)
const omlxF32 = await omlxBlocks(fxRoot, 'tiny-t777-f32')
const f32Cmp = await Promise.all(ourF32.map(async (b) => compareBlocks(await readBlock(b.path), omlxF32.get(b.hash)!)))
rmSync(scratch, { recursive: true, force: true })
const side = (cs: typeof mxqCmp) => {
  const all = combine(cs.flatMap((c) => c.tensors.map((t) => t.all)))
  const read = combine(cs.flatMap((c) => c.tensors.map((t) => t.readRows)))
  return {
    blocks: cs.length, metadata_identical: cs.every((c) => c.metadata.length === 0 && c.structure.length === 0),
    bit_identical: cs.filter((c) => identical(c)).length, bit_identical_but_unread_window_row: cs.filter((c) => identical(c, true)).length,
    elements_identical_fraction: all.identicalFraction, max_ulp: all.maxUlp,
    read_rows: { elements_identical_fraction: read.identicalFraction, max_ulp: read.maxUlp, max_rel_error: read.relError },
  }
}
const blocks = {
  compared: mxqCmp.length + f32Cmp.length,
  identical: [...mxqCmp, ...f32Cmp].filter((c) => identical(c)).length,
  note: 'ours vs blocks oMLX\'s own prefix cache wrote (jundot/omlx 1e8a6074 prefix_cache + paged_ssd_cache); metadata compared but created_at and our geometry_fingerprint/content_sha256. ' +
    'No block is bit-identical: our windows hold zeros in the oldest row, which no query reads and oMLX still holds.',
  mlx_cpu_vs_omlx: side(mxqCmp),
  f32_vs_omlx: side(f32Cmp),
  restored_by_omlx_prefix_cache: { mlx_cpu: mxqCase.stores['mlx-cpu'], f32: f32Case.stores.f32 },
  restored_in_omlx_exact: { blocks: exact.restored_blocks, logits_steps: exact.logits_steps, bit_identical: exact.logits_steps_bit_identical, greedy_equal: exact.greedy_equal },
  restored_in_omlx_f32: { blocks: f32.restored_blocks, logits_rel_error_max: f32.logits_rel_error_max, greedy_equal: f32.greedy_equal },
  unread_first_window_row_noisy: { logits_rel_error_max: noisy.logits_rel_error_max, greedy_equal: noisy.greedy_equal, logits_bit_identical_to_zero_row: noisy.restored_logits_sha256 === f32.restored_logits_sha256 },
}
const summary = {
  producer: 'harness/mlx/summarize.ts (from harness/mlx/make-fixtures.sh)',
  mlx,
  mlx_lm: { commit: mlxLm },
  model_code: { source: `${model.repo} ${model.path}`, commit: model.commit, files: manifest.files.map((f) => ({ repo: f.repo, path: f.path, commit: f.commit })) },
  cache_code: cacheManifest.files.map((f) => ({ repo: f.repo, path: f.path, commit: f.commit, via: f.via })),
  cases,
  blocks,
}
writeFileSync(opts.out!, JSON.stringify(summary, null, 2) + '\n')
console.log(`wrote ${opts.out}`)

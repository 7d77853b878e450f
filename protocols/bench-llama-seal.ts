// What the llama.cpp writer leaves after the seal, streamed vs write-after. Run:
// npx tsx protocols/bench-llama-seal.ts [tokens] (default 8192). Checkpoint tiny seed 1 with mirrored
// indexer heads, an f32 sidecar at blocks of 256; our f32 engine's attention inputs (prefill in
// chunks of 2048) are fed into a segment-publishing capture chunk by chunk, the LlamaCppSegmentWriter
// staging between chunks; then `finish` (what remains at the seal) is timed, and the write-after
// LlamaCppStateWriter on the same sealed capture (open to finalize). Two repeats; the writers' own
// timings split each: read, stage (staged blocks built, put, verified), restore (our cache at S from
// them), state (the build), write (put), verify (the state re-read). Prints one JSON line per repeat
// (whether the two state files are byte-identical among them) and writes results/bench/llama-seal-<date>.json. Nothing is asserted on time: it depends on the
// machine and its load.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { CaptureSession, exportWeights } from '../src/capture/index.ts'
import { stateGeometry } from '../src/engines/llama-cpp/state/index.ts'
import { LlamaCppStateStore } from '../src/engines/llama-cpp/store/index.ts'
import { LlamaCppSegmentWriter, LlamaCppStateWriter } from '../src/engines/llama-cpp/target/index.ts'
import { loadCheckpoint, makeCheckpoint } from '../src/model/checkpoint/index.ts'
import { DeepseekV4Engine } from '../src/model/engine/index.ts'
import { helpAndExit, usageError } from './bench-cli.ts'

helpAndExit('usage: npx tsx protocols/bench-llama-seal.ts [tokens]  (a multiple of 2048; default 8192)')
const T = Number(process.argv[2] ?? 8192)
if (!Number.isInteger(T) || T <= 0 || T % 2048 !== 0) usageError('bench-llama-seal', `tokens must be a positive multiple of 2048, got ${process.argv[2]}`)
const BS = 256
const CHUNK = 2048
const root = mkdtempSync(join(tmpdir(), 'pd-bridge-llama-seal-'))
const runs: unknown[] = []
try {
  const model = join(root, 'model')
  await makeCheckpoint({ preset: 'tiny', seed: 1, out: model, mirrorIndexerHeads: true })
  const ckpt = await loadCheckpoint(model)
  const sidecar = await exportWeights({ model, profile: 'f32', out: join(root, 'sidecar'), blockSize: BS })
  const g = stateGeometry(ckpt.config, { kvCacheType: 'F32', flashAttention: false })
  let s = 12345
  const tokens = Array.from({ length: T }, () => { s = (s * 1103515245 + 12345) % 2147483648; return s % ckpt.config.vocabSize })
  const hidden = ckpt.config.hiddenSize
  const inputs = Array.from({ length: ckpt.config.numHiddenLayers }, () => new Float32Array(T * hidden))
  const engine = DeepseekV4Engine.fromCheckpoint(ckpt, 'f32')
  engine.prefill(tokens, engine.newCache(), { logits: 'none', maxChunk: CHUNK, attnInputHook: (layer, start, rows, count) => inputs[layer].set(rows.subarray(0, count * hidden), start * hidden) })
  const pick = (x: Record<string, number>): Record<string, number> => Object.fromEntries(['read', 'stage', 'restore', 'state', 'write', 'verify'].map((k) => [k, Math.round(x[k] ?? 0)]))
  for (let rep = 0; rep < 2; rep++) {
    const captureRoot = join(root, `captures-${rep}`)
    mkdirSync(captureRoot)
    const requestId = `seal-${rep}`
    const session = await CaptureSession.start({ sidecar, captureRoot, requestId, tokenCount: T, tokens, segments: true })
    const streamedStore = LlamaCppStateStore.open({ dir: join(root, `streamed-${rep}`), modelName: 'tiny-mirror', blockSize: BS, geometry: g })
    const w = await LlamaCppSegmentWriter.open(session.dir, { store: streamedStore, cfg: ckpt.config, sidecar, requestId, tokens })
    for (let c0 = 0; c0 < T; c0 += CHUNK) {
      inputs.forEach((x, layer) => session.onAttentionInput(layer, c0, x.subarray(c0 * hidden, (c0 + CHUNK) * hidden), CHUNK))
      await session.flush()
      await w.writeReady()
    }
    const beforeSeal = w.blocksWritten
    await session.finish()
    let t = performance.now()
    const streamed = await w.finish()
    const sealMs = performance.now() - t
    const afterStore = LlamaCppStateStore.open({ dir: join(root, `after-${rep}`), modelName: 'tiny-mirror', blockSize: BS, geometry: g })
    t = performance.now()
    const after = await (await LlamaCppStateWriter.open(session.dir, { store: afterStore, cfg: ckpt.config, sidecar, requestId, tokens })).finalize()
    const afterMs = performance.now() - t
    const identical = readFileSync(streamed.states[0].path).equals(readFileSync(after.states[0].path))
    const run = {
      tokens: T, blockSize: BS, chunk: CHUNK, rep, blocksStagedBeforeSeal: beforeSeal, blocks: streamed.blocks, stateBytes: streamed.bytes, identical,
      streamedAfterSealMs: Math.round(sealMs), streamedStagedVerifyMs: Math.round(streamed.staged.timings.verify ?? 0), streamed: pick(streamed.timings),
      writeAfterMs: Math.round(afterMs), writeAfter: pick(after.timings), load1: loadavg()[0],
    }
    runs.push(run)
    console.log(JSON.stringify(run))
  }
  const out = join(import.meta.dirname, '..', 'results', 'bench', `llama-seal-${new Date().toISOString().replace(/[:.]/g, '-')}.json`)
  writeFileSync(out, JSON.stringify({ protocol: 'protocols/bench-llama-seal.ts', cpus: cpus().length, cpu: cpus()[0]?.model, runs }, null, 2) + '\n')
  console.log(`wrote ${out}`)
} finally {
  rmSync(root, { recursive: true, force: true })
}

// What the GPU engine's arithmetic does downstream (issue #44: the distance the reference system
// lists as never measured). From what hook_inputs.py wrote (transformers' attention inputs on the
// GPU, the torch hook's capture of them, the ids), against our decoder on the same ids:
//   1. per layer, transformers' attention inputs vs our decoder's own (identical fraction, worst
//      and mean relative error);
//   2. the bridged cache (the GPU capture written into a block store by our block writer and
//      restored by our decoder's prefix cache) vs the native one (our prefill): identical arrays;
//   3. the next-token distributions after each, teacher-forced on the native greedy answer: KL
//      divergence (native || bridged) per step, top-1 agreement, worst |logit difference|.
// Writes one JSON record (schema pd-bridge/downstream@1); prints a summary. A tolerance-based
// comparison of two engines by nature: it reports distances and asserts nothing.
//
//   npx tsx protocols/cuda-rung/downstream.ts --model DIR --sidecar DIR --dir DIR --out FILE.json
//       [--answer 32] [--block-size 256] [--gpu NAME]
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { loadSidecar } from '../../src/capture/index.ts'
import { readAttentionInputs } from '../../src/cli/commands/pool.ts'
import { DecoderPrefixCache, compareCaches } from '../../src/decode/prefix-cache/index.ts'
import { streamBlocks } from '../../src/decode/writer/index.ts'
import { DeepseekV4Engine } from '../../src/model/engine/index.ts'

const { values } = parseArgs({ options: {
  model: { type: 'string' }, sidecar: { type: 'string' }, dir: { type: 'string' }, out: { type: 'string' },
  answer: { type: 'string' }, 'block-size': { type: 'string' }, gpu: { type: 'string' },
} })
if (values.model === undefined || values.sidecar === undefined || values.dir === undefined || values.out === undefined) {
  process.stderr.write('usage: downstream.ts --model DIR --sidecar DIR --dir DIR (hook_inputs.py --out) --out FILE.json [--answer 32] [--block-size 256] [--gpu NAME]\n')
  process.exit(2)
}
const answer = Number(values.answer ?? 32)
const blockSize = Number(values['block-size'] ?? 256)
if (!Number.isSafeInteger(answer) || answer < 1 || !Number.isSafeInteger(blockSize) || blockSize < 1) {
  process.stderr.write('downstream: --answer and --block-size must be positive integers\n')
  process.exit(2)
}
const dir = values.dir
const sidecar = await loadSidecar(values.sidecar)
const engine = await DeepseekV4Engine.load(values.model, sidecar.profile.name)
const cfg = engine.config
const hidden = cfg.hiddenSize
const tokens = JSON.parse(await readFile(join(dir, 'tokens.json'), 'utf8')) as number[]
const theirs = await readAttentionInputs(join(dir, 'attn-inputs.safetensors'), cfg.numHiddenLayers, hidden)
if (theirs.tokens !== tokens.length) throw new Error(`${dir}: ${theirs.tokens} attention-input rows but ${tokens.length} ids`)

/** Relative distance of two rows sets: identical fraction, worst and mean |a-b| / max(|b|, tiny). */
function rowDistance (a: Float32Array, b: Float32Array): { elements: number, identical: number, worstRel: number, meanRel: number, worstAbs: number } {
  let identical = 0
  let worstRel = 0
  let sumRel = 0
  let worstAbs = 0
  for (let i = 0; i < a.length; i++) {
    if (Object.is(a[i], b[i])) { identical++; continue }
    const abs = Math.abs(a[i] - b[i])
    const rel = abs / Math.max(Math.abs(b[i]), 1e-30)
    if (rel > worstRel) worstRel = rel
    if (abs > worstAbs) worstAbs = abs
    sumRel += rel
  }
  return { elements: a.length, identical, worstRel, meanRel: sumRel / a.length, worstAbs }
}

// The bridged cache: the GPU capture through our block writer into a store, restored by our prefix cache.
const scratch = await mkdtemp(join(tmpdir(), 'pd-downstream-'))
let result
let prefillSeconds: number | undefined
const ours = Array.from({ length: cfg.numHiddenLayers }, () => new Float32Array(tokens.length * hidden))
// startPos is absolute (the cache's token count), so both chunks land in place.
const attnInputHook = (layer: number, startPos: number, x: Float32Array, count: number): void => { ours[layer].set(x.subarray(0, count * hidden), startPos * hidden) }
try {
  const gpuId = (await readdir(join(dir, 'gpu')))[0]
  const store = await DecoderPrefixCache.open({ storeRoot: join(scratch, 'store'), modelName: resolve(values.model), cfg, profile: engine.profile, blockSize, engine, log: () => {} })
  const written = await streamBlocks({ dir: join(dir, 'gpu', gpuId), target: store, sidecar, requestId: gpuId, tokens })
  const hit = await store.lookup(tokens, { exactPromptRule: false })
  if (hit.cache === null) throw new Error(`no cache restored from the bridged blocks: ${hit.reason ?? 'no block matched'}`)
  const bridged = engine.completeCarries(hit.cache)
  const restoredTokens = bridged.tokenCount
  if (restoredTokens >= tokens.length) throw new Error('the bridged blocks cover the whole prompt: no logits to start from (use a prompt that is not a multiple of the block size)')
  // Our decoder's own prefill, in two chunks (the engine's chunks give the same bits): to the
  // restored boundary, where the cache arrays are compared, then the tail; attention inputs recorded throughout.
  const started = performance.now()
  const native = engine.newCache()
  engine.prefill(tokens.slice(0, restoredTokens), native, { logits: 'none', attnInputHook })
  const arrays = compareCaches(cfg, bridged, native, blockSize)
  const nativeTail = engine.prefill(tokens.slice(restoredTokens), native, { logits: { tail: 1 }, attnInputHook })
  prefillSeconds = (performance.now() - started) / 1000
  const bridgedTail = engine.prefill(tokens.slice(restoredTokens), bridged, { logits: { tail: 1 } })
  // The answer, teacher-forced on the native greedy picks.
  const steps = []
  let p = nativeTail.logits.subarray(nativeTail.logits.length - cfg.vocabSize)
  let q = bridgedTail.logits.subarray(bridgedTail.logits.length - cfg.vocabSize)
  for (let s = 0; s < answer; s++) {
    const d = distributionDistance(p, q)
    steps.push(d)
    if (s + 1 < answer) {
      p = engine.decode(d.nativeTop1, native)
      q = engine.decode(d.nativeTop1, bridged)
    }
  }
  result = {
    restoredTokens,
    blocksWritten: written.written,
    cacheArrays: arrays.length,
    cacheArraysIdentical: arrays.filter((c) => c.identical).length,
    answerSteps: steps.length,
    top1Agreement: steps.filter((s) => s.nativeTop1 === s.bridgedTop1).length / steps.length,
    klMean: steps.reduce((a, s) => a + s.kl, 0) / steps.length,
    klMax: Math.max(...steps.map((s) => s.kl)),
    worstLogitDiff: Math.max(...steps.map((s) => s.worstLogitDiff)),
    steps,
  }
} finally {
  await rm(scratch, { recursive: true, force: true })
}
const attentionInputs = ours.map((x, layer) => ({ layer, ...rowDistance(theirs.rows[layer], x) }))

/** KL(softmax(p) || softmax(q)) in nats, in double; the two argmaxes (ties to the lower id) and the worst |p - q|. */
function distributionDistance (p: Float32Array, q: Float32Array): { kl: number, nativeTop1: number, bridgedTop1: number, worstLogitDiff: number } {
  let pm = -Infinity
  let qm = -Infinity
  let pa = 0
  let qa = 0
  let worst = 0
  for (let i = 0; i < p.length; i++) {
    if (p[i] > pm) { pm = p[i]; pa = i }
    if (q[i] > qm) { qm = q[i]; qa = i }
    worst = Math.max(worst, Math.abs(p[i] - q[i]))
  }
  let ps = 0
  let qs = 0
  for (let i = 0; i < p.length; i++) { ps += Math.exp(p[i] - pm); qs += Math.exp(q[i] - qm) }
  const plog = Math.log(ps)
  const qlog = Math.log(qs)
  let kl = 0
  for (let i = 0; i < p.length; i++) {
    const lp = p[i] - pm - plog
    const lq = q[i] - qm - qlog
    kl += Math.exp(lp) * (lp - lq)
  }
  return { kl: Math.max(0, kl), nativeTop1: pa, bridgedTop1: qa, worstLogitDiff: worst }
}

const inputsSummary = {
  elements: attentionInputs.reduce((a, l) => a + l.elements, 0),
  identical: attentionInputs.reduce((a, l) => a + l.identical, 0),
  worstRel: Math.max(...attentionInputs.map((l) => l.worstRel)),
}
const record = {
  schema: 'pd-bridge/downstream@1',
  gpu: values.gpu ?? null,
  tokens: tokens.length,
  profile: engine.profile.name,
  sidecarFingerprint: sidecar.fingerprint,
  blockSize,
  ourPrefillSeconds: prefillSeconds,
  attentionInputs,
  attentionInputsSummary: inputsSummary,
  ...result,
}
await writeFile(values.out, JSON.stringify(record, null, 2) + '\n')
console.log(`transformers' attention inputs vs our decoder's, T=${tokens.length}: ${inputsSummary.identical}/${inputsSummary.elements} identical, worst relative ${inputsSummary.worstRel.toExponential(2)}; ` +
  `per layer mean relative ${attentionInputs.map((l) => l.meanRel.toExponential(2)).join(', ')}`)
console.log(`bridged (GPU capture) vs native cache at ${result.restoredTokens} tokens: ${result.cacheArraysIdentical}/${result.cacheArrays} arrays identical; ` +
  `answer of ${result.answerSteps} steps teacher-forced on the native picks: top-1 agreement ${(100 * result.top1Agreement).toFixed(1)}%, KL mean ${result.klMean.toExponential(2)} max ${result.klMax.toExponential(2)} nats, worst |logit diff| ${result.worstLogitDiff.toExponential(2)}`)

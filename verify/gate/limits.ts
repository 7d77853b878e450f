// Stale limits: every number sized against the window, checked against the window with one rule
// each. Raising the window without raising these gives failures that look like model or bridge
// bugs (the seed README: a 48-token answer budget read as a retrieval MISS; a capture that died
// for memory; captures flushed mid-request by a short watcher). docs/window-gate.md says why each
// rule exists.
import { heldBytes, type LiveLayer } from '../../src/capture/budget.ts'
import { layerGeometries } from '../../src/capture/payload.ts'
import { fmt, type Finding } from './finding.ts'
import { windowStoreBytes } from './block-bytes.ts'
import { originOf, WINDOW_SIZED_DEADLINES, type LaunchParams } from './launch.ts'
import type { ConfigPlace, SidecarPlace } from './places.ts'

/** What the rules read: the launch parameters and whichever model files could be read. */
export interface LimitContext {
  launch: LaunchParams
  prefill?: ConfigPlace
  decoder?: ConfigPlace
  sidecar?: SidecarPlace
  /** The decoder's cache element size in bytes (2 for bf16 activations, 4 for f32). */
  bytesPerValue?: number
}

/** The longest prompt the bridge sends: PD_MAX_BRIDGE_TOKENS, or the window minus one when unset. */
export function longestBridgedPrompt (launch: LaunchParams): number {
  return launch.maxBridgeTokens ?? launch.maxModelLen - 1
}

/** Bytes a capture of `tokens` tokens holds when every layer is held to the end (chunked prefill). */
export function captureBytes (sidecar: SidecarPlace, tokens: number): number {
  const layers: LiveLayer[] = layerGeometries(sidecar.json).map((geometry) => ({ geometry, position: tokens, blockSize: sidecar.json.blockSize }))
  return heldBytes(layers)
}

// The largest token count whose capture fits `budget` (bisection: the count is not quite monotone
// at ratio boundaries, so this is "about").
function largestCaptureFitting (sidecar: SidecarPlace, budget: number, upTo: number): number {
  let lo = 0
  let hi = upTo
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2)
    if (captureBytes(sidecar, mid) <= budget) lo = mid
    else hi = mid - 1
  }
  return lo
}

/** Run every limit rule; a rule whose inputs are not set is a `skip` that says what is missing. */
export function checkLimits (ctx: LimitContext): Finding[] {
  const { launch } = ctx
  const out: Finding[] = []
  // Filed under the key's origin: the launch file, or the deployment config that set it.
  const add = (rule: string, status: Finding['status'], key: string, message: string, where?: string) => {
    const origin = where === undefined ? originOf(launch, key) : { file: where, field: key }
    out.push({ check: 'limits', rule, status, file: origin.file, field: origin.field, message })
  }
  const W = launch.maxModelLen
  const L = longestBridgedPrompt(launch)
  const A = launch.minAnswerTokens
  const context = launch.decoderMaxContext ?? W

  // YaRN's convention: the scaled window is factor x the original one.
  const scaled = launch.ropeFactor * launch.originalMaxPos
  if (scaled !== W) {
    add('yarn-window', 'warn', 'PD_ROPE_FACTOR', `PD_ROPE_FACTOR ${launch.ropeFactor} x PD_ORIGINAL_MAX_POS ${fmt(launch.originalMaxPos)} = ${fmt(scaled)}, but PD_MAX_MODEL_LEN is ${fmt(W)}: YaRN factors are normally window / original window (${fmt(W / launch.originalMaxPos)} here)`)
  } else {
    add('yarn-window', 'pass', 'PD_ROPE_FACTOR', `factor ${launch.ropeFactor} x original ${fmt(launch.originalMaxPos)} = the window ${fmt(W)}`)
  }

  // Bridge token cap.
  if (launch.maxBridgeTokens === undefined) {
    add('bridge-cap', 'warn', 'PD_MAX_BRIDGE_TOKENS', `not set: prompts up to the window minus one (${fmt(L)}) are bridged`)
  } else if (L > W - 1) {
    add('bridge-cap', 'fail', 'PD_MAX_BRIDGE_TOKENS', `is ${fmt(L)}, past the window: a bridged prompt must leave room for an answer in PD_MAX_MODEL_LEN ${fmt(W)}`)
  } else if (L <= launch.originalMaxPos) {
    add('bridge-cap', 'warn', 'PD_MAX_BRIDGE_TOKENS', `is ${fmt(L)}, at or below the native window ${fmt(launch.originalMaxPos)}: the bridge never runs where the window change matters, and the window's top is served natively only`)
  } else if (launch.defaultMaxTokens !== undefined && L < W - launch.defaultMaxTokens) {
    add('bridge-cap', 'warn', 'PD_MAX_BRIDGE_TOKENS', `is ${fmt(L)}: prompts of ${fmt(L + 1)}..${fmt(W - launch.defaultMaxTokens)} tokens fit the window with a full answer but take the native path (sized against an older window, or your measured headroom?)`)
  } else {
    add('bridge-cap', 'pass', 'PD_MAX_BRIDGE_TOKENS', `${fmt(L)}: above the native window ${fmt(launch.originalMaxPos)}, within the window ${fmt(W)}`)
  }

  // Prefill engine: max length and batched tokens.
  if (launch.prefillMaxModelLen === undefined) {
    add('prefill-max-len', 'skip', 'PD_PREFILL_MAX_MODEL_LEN', 'not set')
  } else if (launch.prefillMaxModelLen < L) {
    add('prefill-max-len', 'fail', 'PD_PREFILL_MAX_MODEL_LEN', `is ${fmt(launch.prefillMaxModelLen)}, below the longest bridged prompt ${fmt(L)}: the prefill engine refuses prompts the front door sends it (stale: sized against an older window?)`)
  } else if (ctx.prefill !== undefined && launch.prefillMaxModelLen > ctx.prefill.config.maxPositionEmbeddings) {
    add('prefill-max-len', 'fail', 'PD_PREFILL_MAX_MODEL_LEN', `is ${fmt(launch.prefillMaxModelLen)}, past the prefill config's max_position_embeddings ${fmt(ctx.prefill.config.maxPositionEmbeddings)} (${ctx.prefill.file})`)
  } else {
    add('prefill-max-len', 'pass', 'PD_PREFILL_MAX_MODEL_LEN', `${fmt(launch.prefillMaxModelLen)} covers the longest bridged prompt ${fmt(L)}`)
  }
  if (launch.prefillMaxBatchedTokens === undefined) {
    add('prefill-batch', 'skip', 'PD_PREFILL_MAX_BATCHED_TOKENS', 'not set')
  } else if (!launch.prefillChunked && launch.prefillMaxBatchedTokens < L) {
    add('prefill-batch', 'fail', 'PD_PREFILL_MAX_BATCHED_TOKENS', `is ${fmt(launch.prefillMaxBatchedTokens)} with chunked prefill off (PD_PREFILL_CHUNKED): a prompt must fit one batch, and the longest bridged prompt is ${fmt(L)}`)
  } else {
    add('prefill-batch', 'pass', 'PD_PREFILL_MAX_BATCHED_TOKENS', launch.prefillChunked
      ? `${fmt(launch.prefillMaxBatchedTokens)} per batch, chunked prefill on: a prompt spans batches`
      : `${fmt(launch.prefillMaxBatchedTokens)} per batch holds the longest bridged prompt ${fmt(L)}`)
  }

  // Decoder max context.
  if (launch.decoderMaxContext === undefined) {
    add('decoder-context', 'skip', 'PD_DECODER_MAX_CONTEXT', 'not set (the window is used as the decoder\'s context)')
  } else if (launch.decoderMaxContext < W) {
    add('decoder-context', 'fail', 'PD_DECODER_MAX_CONTEXT', `is ${fmt(launch.decoderMaxContext)}, below the window ${fmt(W)}: the decoder cannot hold a full-window request (stale: sized against an older window?)`)
  } else if (ctx.decoder !== undefined && launch.decoderMaxContext > ctx.decoder.config.maxPositionEmbeddings) {
    add('decoder-context', 'fail', 'PD_DECODER_MAX_CONTEXT', `is ${fmt(launch.decoderMaxContext)}, past the decoder config's max_position_embeddings ${fmt(ctx.decoder.config.maxPositionEmbeddings)} (${ctx.decoder.file})`)
  } else {
    add('decoder-context', 'pass', 'PD_DECODER_MAX_CONTEXT', `${fmt(launch.decoderMaxContext)} holds the window ${fmt(W)}`)
  }

  // Default answer budget, and what the context clamps it to for the longest bridged prompt.
  if (launch.defaultMaxTokens === undefined) {
    add('answer-budget', 'skip', 'PD_DEFAULT_MAX_TOKENS', 'not set')
  } else if (launch.defaultMaxTokens < A) {
    add('answer-budget', 'fail', 'PD_DEFAULT_MAX_TOKENS', `is ${fmt(launch.defaultMaxTokens)}, below PD_MIN_ANSWER_TOKENS ${fmt(A)}: a model that reasons first returns empty content and a retrieval reads as a MISS (the seed's 48-token needle budget)`)
  } else {
    add('answer-budget', 'pass', 'PD_DEFAULT_MAX_TOKENS', `${fmt(launch.defaultMaxTokens)} >= ${fmt(A)}`)
  }
  const room = context - L
  // The fix is a smaller bridge cap (or a larger context), so the rule is filed under the cap.
  const roomField = 'PD_MAX_BRIDGE_TOKENS'
  const contextName = launch.decoderMaxContext === undefined ? 'PD_MAX_MODEL_LEN' : 'PD_DECODER_MAX_CONTEXT'
  if (room < A) {
    const clamp = room <= 1
      ? `every answer to a prompt of ${fmt(context - 1)} tokens or more is clamped to one token`
      : `answers to the longest bridged prompts are clamped to ${fmt(Math.max(room, 0))} tokens`
    add('answer-clamp', 'fail', roomField, `the longest bridged prompt is ${fmt(L)} tokens${launch.maxBridgeTokens === undefined ? ' (no PD_MAX_BRIDGE_TOKENS: the window minus one)' : ''} and ${contextName} is ${fmt(context)}: ${clamp} (max length minus prompt length); keep PD_MAX_BRIDGE_TOKENS <= ${fmt(context - A)} so every answer gets PD_MIN_ANSWER_TOKENS ${fmt(A)}`)
  } else {
    add('answer-clamp', 'pass', roomField, `the longest bridged prompt (${fmt(L)}) leaves ${fmt(room)} answer tokens in ${contextName} ${fmt(context)}`)
  }

  // Capture memory budget vs what a capture of the longest bridged prompt holds.
  if (launch.captureBudgetBytes === undefined) {
    add('capture-budget', 'skip', 'PD_CAPTURE_BUDGET_BYTES', 'not set')
  } else if (ctx.sidecar === undefined) {
    add('capture-budget', 'skip', 'PD_CAPTURE_BUDGET_BYTES', 'the sidecar could not be read, so the capture size is unknown')
  } else {
    const need = captureBytes(ctx.sidecar, L)
    const perToken = (need / L).toFixed(1)
    if (launch.captureBudgetBytes < need) {
      const fits = largestCaptureFitting(ctx.sidecar, launch.captureBudgetBytes, L)
      add('capture-budget', 'fail', 'PD_CAPTURE_BUDGET_BYTES', `is ${fmt(launch.captureBudgetBytes)} bytes, but a capture of the longest bridged prompt (${fmt(L)} tokens) holds ${fmt(need)} bytes (${perToken} bytes/token): captures past about ${fmt(fits)} tokens seal a partial prefix and the window's top is never fully bridged`)
    } else {
      add('capture-budget', 'pass', 'PD_CAPTURE_BUDGET_BYTES', `${fmt(launch.captureBudgetBytes)} bytes hold a ${fmt(L)}-token capture (${fmt(need)} bytes, ${perToken} bytes/token)`)
    }
  }

  // Block size agreement, and the store size for one full window.
  const blockSize = launch.blockSize ?? ctx.sidecar?.json.blockSize
  if (ctx.sidecar !== undefined && launch.blockSize !== undefined && launch.blockSize !== ctx.sidecar.json.blockSize) {
    add('block-size', 'fail', 'blockSize', `is ${fmt(ctx.sidecar.json.blockSize)} in the sidecar but the decoder's block size is ${fmt(launch.blockSize)} (${originOf(launch, 'PD_BLOCK_SIZE').file} ${originOf(launch, 'PD_BLOCK_SIZE').field}): the bridge would write blocks the decoder's store never serves (re-run export-weights --block-size)`, ctx.sidecar.file)
  } else if (ctx.sidecar !== undefined && blockSize !== undefined) {
    const bad = [...new Set(ctx.sidecar.json.layers.map((l) => l.compressRatio).filter((r) => r > 0 && blockSize % r !== 0))]
    if (bad.length > 0) add('block-size', 'fail', 'PD_BLOCK_SIZE', `${fmt(blockSize)} is not a multiple of the pool ratio(s) ${bad.join(', ')}: every block must add whole pooled rows`)
    else add('block-size', 'pass', 'PD_BLOCK_SIZE', `${fmt(blockSize)} tokens per block, a multiple of every pool ratio`)
  }
  if (launch.storeMaxBytes === undefined) {
    add('store-size', 'skip', 'PD_STORE_MAX_BYTES', 'not set')
  } else if (ctx.sidecar === undefined || blockSize === undefined || ctx.bytesPerValue === undefined) {
    add('store-size', 'skip', 'PD_STORE_MAX_BYTES', 'the sidecar could not be read, so the block size is unknown')
  } else {
    const need = windowStoreBytes(ctx.sidecar.json, W, blockSize, ctx.bytesPerValue)
    if (launch.storeMaxBytes < need.bytes) {
      add('store-size', 'fail', 'PD_STORE_MAX_BYTES', `is ${fmt(launch.storeMaxBytes)} bytes, but one full window is ${fmt(need.blocks)} blocks of ${fmt(blockSize)} tokens, ${fmt(need.bytes)} bytes (${fmt(need.dataBytes)} of tensor data plus header allowance): the store evicts a long prompt's first blocks while writing its last`)
    } else {
      add('store-size', 'pass', 'PD_STORE_MAX_BYTES', `${fmt(launch.storeMaxBytes)} bytes hold one full window (${fmt(need.blocks)} blocks, ${fmt(need.bytes)} bytes)`)
    }
  }

  // Stage deadlines that contain a full-window prefill vs the expected prefill time.
  const deadlines = Object.entries(launch.deadlinesMs).sort(([x], [y]) => x < y ? -1 : 1)
  const sized = deadlines.filter(([key]) => WINDOW_SIZED_DEADLINES.includes(key))
  for (const [key] of deadlines) {
    if (!WINDOW_SIZED_DEADLINES.includes(key)) add('deadlines', 'skip', key, 'a stage that does not contain the prefill: not checked against the window')
  }
  if (sized.length === 0) {
    add('deadlines', 'skip', 'PD_DEADLINE_*_MS', `none of ${WINDOW_SIZED_DEADLINES.join(', ')} is set`)
  } else if (launch.prefillTokensPerS === undefined) {
    add('deadlines', 'warn', 'PD_PREFILL_TOKENS_PER_S', `not set, so ${sized.map(([k]) => k).join(', ')} cannot be checked against the prefill time at the full window`)
  } else {
    const expectedMs = W / launch.prefillTokensPerS * 1000
    const needMs = Math.ceil(expectedMs * launch.deadlineMargin)
    for (const [key, ms] of sized) {
      if (ms < needMs) {
        add('deadlines', 'fail', key, `is ${fmt(ms)} ms, but prefilling the full window (${fmt(W)} tokens at PD_PREFILL_TOKENS_PER_S ${launch.prefillTokensPerS}) takes about ${fmt(Math.round(expectedMs))} ms; with PD_DEADLINE_MARGIN ${launch.deadlineMargin} it must be at least ${fmt(needMs)} ms, or full-window requests time out and fall back`)
      } else {
        add('deadlines', 'pass', key, `${fmt(ms)} ms >= ${fmt(needMs)} ms (full-window prefill about ${fmt(Math.round(expectedMs))} ms x ${launch.deadlineMargin})`)
      }
    }
  }

  for (const key of launch.unknownKeys) add('unknown-key', 'warn', key, 'is not a launch key the gate knows (a typo?); it was ignored')
  return out
}

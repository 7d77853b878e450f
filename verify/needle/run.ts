// One needle run: check the document against the seed ledger, ask the bridged front door and the
// decoder alone (each optional) with the same streamed request, score both answers, record the
// document in the ledger under the deployment's geometry, and return the run record. A document
// that shares leading blocks with one cached under another geometry is refused, not run: the
// decoder could serve those blocks from the old geometry, and the answer would mean nothing.
import { mkdir } from 'node:fs/promises'
import { join } from 'node:path'
import { ConfigError } from '../../src/errors.ts'
import type { SeedLedger, SeedReuse } from './seed-ledger.ts'
import type { RunEnvironment } from '../results/record.ts'
import type { NeedleDocument } from './document.ts'
import type { DeploymentGeometry } from './geometry.ts'
import { NEEDLE_RECORD_SCHEMA, parseNeedleRecord, type NeedleBridgedLeg, type NeedleNativeLeg, type NeedleRunRecord } from './record.ts'
import { scoreBridged, scoreNative } from './score.ts'
import { streamChat, type StreamedAnswer } from './stream.ts'
import { writeFileAtomic } from '../../src/formats/atomic-file.ts'

/** The default answer budget (max_tokens): room for an answer with its reasoning. */
export const DEFAULT_ANSWER_BUDGET = 300

/** The least budget taken without insisting: anything shorter can cut a reasoning model's answer off. */
export const MIN_ANSWER_BUDGET = 256

/** max_tokens of both legs, and whether the user insisted on less than the minimum. */
export interface AnswerBudget {
  maxTokens: number
  belowMinimum: boolean
}

/** The answer budget: at least MIN_ANSWER_BUDGET unless `insist`. */
export function answerBudget (maxTokens: number = DEFAULT_ANSWER_BUDGET, insist = false): AnswerBudget {
  if (!Number.isSafeInteger(maxTokens) || maxTokens < 1) throw new ConfigError('--max-tokens', `must be a positive integer, got ${String(maxTokens)}`)
  if (maxTokens < MIN_ANSWER_BUDGET && !insist) {
    throw new ConfigError('--max-tokens', `${maxTokens} is below the ${MIN_ANSWER_BUDGET}-token minimum answer budget, which can cut answers off before the needle; pass --allow-short-budget to insist`)
  }
  return { maxTokens, belowMinimum: maxTokens < MIN_ANSWER_BUDGET }
}

/** What the ledger hashes of a document. */
export interface LedgerDocument {
  /** Token ids (exact) or the user content's UTF-8 bytes (no tokenizer). */
  units: ArrayLike<number>
  /** Units per block. */
  blockSize: number
  unit: 'tokens' | 'bytes'
}

/**
 * The ledger's view of a document: its token ids in blocks of the deployment's block size, or,
 * without a tokenizer, the user content's bytes in blocks of blockSize * charsPerToken bytes (two
 * documents sharing a byte prefix that long share roughly a block of tokens).
 */
export function ledgerDocument (doc: NeedleDocument, blockSize: number): LedgerDocument {
  if (doc.tokens !== null) return { units: doc.tokens, blockSize, unit: 'tokens' }
  const bytes = new TextEncoder().encode(doc.messages.map((m) => m.content).join('\n'))
  return { units: bytes, blockSize: Math.ceil(blockSize * (doc.charsPerToken ?? 1)), unit: 'bytes' }
}

/** The ledger's verdict on a document before it is run. */
export interface LedgerCheck {
  outcome: 'fresh' | 'reused-same-geometry' | 'reused-seed'
  reuses: SeedReuse[]
}

/** Check `doc` against `ledger`: any leading block shared with an entry of another geometry is a reused seed. */
export function checkLedger (ledger: SeedLedger, doc: LedgerDocument, geometry: string): LedgerCheck {
  const reuses = ledger.reuses(doc.units, geometry)
  const outcome = reuses.some((r) => !r.sameGeometry) ? 'reused-seed' : reuses.length > 0 ? 'reused-same-geometry' : 'fresh'
  return { outcome, reuses }
}

/** Everything one run needs. */
export interface NeedleRunOptions {
  document: NeedleDocument
  /** The grid cell: the length asked for, the asked needle's depth, the repeat. */
  cell: { targetTokens: number, depth: number, repeat: number }
  invocationSeed: number
  environment: RunEnvironment
  /** The model id both legs ask for. */
  model: string
  /** The bridged front door; no bridged leg without it. */
  frontUrl?: string
  /** The decoder alone; no native leg without it. */
  nativeUrl?: string
  budget: AnswerBudget
  ledger: SeedLedger
  geometry: DeploymentGeometry
  /** The decoder's block size (the ledger's blocks). */
  blockSize: number
  legTimeoutMs: number
  /** Progress, one line per step. */
  onStep?: (line: string) => void
  /** The clock (tests). */
  now?: () => Date
}

function bridgedLeg (a: StreamedAnswer, expected: string): NeedleBridgedLeg {
  const b = a.pdBridge ?? {}
  const fromBody = typeof b.verdict === 'string' && b.verdict !== '' ? b.verdict : undefined
  // No verdict at all is not a bridge: recorded as declined, never as complete.
  const verdict = fromBody ?? (a.header !== undefined && a.header !== '' ? a.header : 'declined: no verdict in the response')
  const score = scoreBridged(verdict, a.text, expected)
  const bridged = Number.isSafeInteger(b.bridged_tokens) && (b.bridged_tokens as number) >= 0 ? b.bridged_tokens as number : 0
  return {
    verdict, verdictKind: score.verdictKind, route: typeof b.route === 'string' ? b.route : 'unknown', bridgedTokens: bridged,
    promptTokens: a.promptTokens, completionTokens: a.completionTokens, finishReason: a.finishReason,
    answer: a.text, hit: score.hit, outcome: score.outcome, totalMs: a.totalMs, ttftMs: a.ttftMs,
  }
}

function nativeLeg (a: StreamedAnswer, expected: string): NeedleNativeLeg {
  const score = scoreNative(a.text, expected)
  return { promptTokens: a.promptTokens, completionTokens: a.completionTokens, finishReason: a.finishReason, answer: a.text, hit: score.hit, outcome: score.outcome, totalMs: a.totalMs, ttftMs: a.ttftMs }
}

/** Run one needle document (see the file comment); the record is validated before it is returned. */
export async function runNeedle (o: NeedleRunOptions): Promise<NeedleRunRecord> {
  if (o.frontUrl === undefined && o.nativeUrl === undefined) throw new ConfigError('--url', 'a needle run needs a bridged front door (--url), a decoder alone (--native-url), or both')
  const say = o.onStep ?? (() => {})
  const doc = o.document
  const startedAt = (o.now ?? (() => new Date()))().toISOString()
  const view = ledgerDocument(doc, o.blockSize)
  const check = checkLedger(o.ledger, view, o.geometry.fingerprint)
  const foreign = check.reuses.filter((r) => !r.sameGeometry)
  const refused = foreign.length > 0
    ? `reused seed: the document shares its first ${foreign[0].sharedBlocks} block(s) with ${JSON.stringify(foreign[0].entry.label)}, cached under another geometry ${foreign[0].entry.geometry.slice(0, 16)}; the decoder could serve them from the old geometry, so this run would mean nothing: use a fresh seed`
    : null

  let bridged: NeedleBridgedLeg | null = null
  let native: NeedleNativeLeg | null = null
  if (refused === null) {
    const request = { model: o.model, messages: doc.messages, maxTokens: o.budget.maxTokens, timeoutMs: o.legTimeoutMs }
    if (o.frontUrl !== undefined) {
      say('bridged leg')
      bridged = bridgedLeg(await streamChat({ ...request, baseUrl: o.frontUrl, leg: 'bridged' }), doc.expected)
    }
    if (o.nativeUrl !== undefined) {
      say('decoder-alone leg')
      native = nativeLeg(await streamChat({ ...request, baseUrl: o.nativeUrl, leg: 'native' }), doc.expected)
    }
  }
  else {
    say(refused)
  }
  const label = `needle seed ${doc.seed} (${o.cell.targetTokens} tokens, depth ${o.cell.depth}, invocation ${o.invocationSeed})`
  if (refused === null) await o.ledger.record(label, view.units, o.geometry.fingerprint, view.blockSize)

  const record: NeedleRunRecord = {
    schema: NEEDLE_RECORD_SCHEMA,
    runId: `${startedAt.replace(/[:.]/g, '-')}-${o.cell.targetTokens}-d${o.cell.depth}-r${o.cell.repeat}-${doc.seed}`,
    startedAt,
    environment: o.environment,
    invocationSeed: o.invocationSeed,
    seed: doc.seed,
    repeat: o.cell.repeat,
    targetTokens: o.cell.targetTokens,
    depth: o.cell.depth,
    document: { promptTokens: doc.promptTokens, positions: doc.positions, charsPerToken: doc.charsPerToken, minDistance: doc.minDistance, questionPosition: doc.questionPosition },
    needles: doc.needles.map((n) => ({ key: n.key, marker: n.marker, value: n.value, depth: n.depth, position: n.position, distance: n.distance })),
    asked: { key: doc.ask, question: doc.question },
    expected: doc.expected,
    answerBudget: { ...o.budget },
    geometry: { fingerprint: o.geometry.fingerprint, source: o.geometry.source, store: o.geometry.store, sidecar: o.geometry.sidecar, label: o.geometry.label, blockSize: o.blockSize },
    ledger: {
      file: o.ledger.file,
      unit: view.unit,
      outcome: check.outcome,
      reuses: check.reuses.map((r) => ({ label: r.entry.label, geometry: r.entry.geometry, sharedBlocks: r.sharedBlocks, sameGeometry: r.sameGeometry })),
      recorded: refused === null,
    },
    refused,
    bridged,
    native,
  }
  return parseNeedleRecord(record, `needle run ${record.runId}`)
}

/** Write `record` as `<dir>/<runId>.json` atomically (temporary sibling, fsync, rename); returns the file. */
export async function writeNeedleRecord (dir: string, record: NeedleRunRecord): Promise<string> {
  await mkdir(dir, { recursive: true })
  const file = join(dir, `${record.runId}.json`)
  await writeFileAtomic(file, JSON.stringify(record, null, 2) + '\n')
  return file
}

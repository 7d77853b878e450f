// The needle law (docs/window-gate.md, "The needle law"): the gate says pass only after a needle was
// retrieved THROUGH THE BRIDGE, ABOVE THE NATIVE WINDOW, WITH A FRESH SEED. The evidence is a live
// run against the front door (one document, the needle at depth 1, built with the decoder's own
// tokenizer) or run records written by protocols/needle.mjs. A run counts only under the geometry
// the gate itself computes (the decoder store's fingerprint and the sidecar's, hashed together as
// the needle protocol's ledger does), so a record made before a fix never passes a fixed deployment.
import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { PdBridgeError } from '../../src/errors.ts'
import { loadTokenizer } from '../../src/model/tokenizer/index.ts'
import { buildNeedleDocument, DEFAULT_MIN_DISTANCE } from '../needle/document.ts'
import { combinedGeometry, discoverGeometry, type DeploymentGeometry } from '../needle/geometry.ts'
import { freshInvocationSeed, planNeedles } from '../needle/grid.ts'
import { askedNeedleBridged, parseNeedleRecord, type NeedleRunRecord } from '../needle/record.ts'
import { answerBudget, DEFAULT_ANSWER_BUDGET, runNeedle, writeNeedleRecord } from '../needle/run.ts'
import { remoteEnvironment } from '../results/environment.ts'
import { fmt, type Finding } from './finding.ts'
import { SeedLedger } from '../needle/seed-ledger.ts'
import { apiKeyFromEnv, authHeaders } from '../../src/http/api-key.ts'

/** The geometry a needle run must have been cached under to count: the gate's own. */
export interface NeedleGeometry {
  /** combinedGeometry(store, sidecar): the needle protocol's ledger key. */
  key: string
  /** The decoder store's geometry fingerprint (decoder config.json + profile). */
  store: string
  /** The sidecar's fingerprint (sidecar.json `fingerprint`). */
  sidecar: string
}

/** The gate's ledger key of a decoder geometry and a sidecar fingerprint (the needle protocol's). */
export function needleGeometry (store: string, sidecar: string): NeedleGeometry {
  return { key: combinedGeometry(store, sidecar), store, sidecar }
}

/** What a run is judged against. */
export interface NeedleLawContext {
  geometry: NeedleGeometry
  /** The decoder's original_max_position_embeddings: the native window. */
  original: number
}

/** How one run counts: a bridged pass, a failure of the bridge, or no evidence either way. */
export type NeedleRunStatus = 'pass' | 'fail' | 'not-evidence'

/** One run, judged. */
export interface NeedleJudgement {
  /** The record file, or the front door's URL for a live run. */
  source: string
  status: NeedleRunStatus
  /** Why, in words; for a pass, what was shown. */
  reason: string
  /** The decoder-alone leg's result, for context only. */
  native: string
  /** null when the file could not be read as a record. */
  record: NeedleRunRecord | null
}

/** The answer budget of a gate's needle run: at least the launch's minimum answer tokens and DEFAULT_ANSWER_BUDGET. */
export function needleAnswerBudget (minAnswerTokens: number | undefined): number {
  return Math.max(DEFAULT_ANSWER_BUDGET, minAnswerTokens ?? 0)
}

/** The least distance of the needle from the prompt's end: past the window and the decoder's own last partial block. */
export function needleMinDistance (blockSize: number): number {
  return Math.max(DEFAULT_MIN_DISTANCE, blockSize + 1)
}

/**
 * The default document length: the original window plus two blocks plus 256 tokens. With the needle
 * at depth 1 and minDistance blockSize + 1 it sits past the native window and inside the bridged
 * blocks (a prompt of T tokens bridges floor((T - 1) / blockSize) blocks).
 */
export function defaultNeedleTokens (original: number, blockSize: number): number {
  return original + 2 * blockSize + 256
}

function nativeContext (r: NeedleRunRecord): string {
  if (r.native === null) return 'native leg: not run'
  return `native leg: ${r.native.outcome} (answered ${JSON.stringify(r.native.answer)})`
}

function short (hex: string | null): string {
  return hex === null ? 'none' : hex.slice(0, 16)
}

/**
 * Judge one run record against the law. The order of the rules: the geometry key (a run under
 * another geometry is no evidence for this one), exact positions, the seed ledger, the window, then
 * the bridged leg (verdict, the needle inside the bridged tokens, the answer).
 */
export function judgeNeedleRun (r: NeedleRunRecord, ctx: NeedleLawContext, source: string, freshness?: string): NeedleJudgement {
  const native = nativeContext(r)
  const judged = (status: NeedleRunStatus, reason: string): NeedleJudgement => ({ source, status, reason, native, record: r })
  const g = ctx.geometry
  const asked = r.needles.find((n) => n.key === r.asked.key)
  const where = asked === undefined ? 'no needle of the asked key' : `the asked needle ${JSON.stringify(r.expected)} at position ${fmt(asked.position)}`
  const run = `seed ${r.seed}, ${fmt(r.document.promptTokens)}-token prompt, ${where}`
  if (r.geometry.fingerprint !== g.key) {
    return judged('not-evidence', `${run}: recorded under geometry ${short(r.geometry.fingerprint)} (store ${short(r.geometry.store)}, sidecar ${short(r.geometry.sidecar)}), not this deployment's ${short(g.key)} (store ${short(g.store)}, sidecar ${short(g.sidecar)}): a run made under another geometry (before a fix) never counts`)
  }
  if (r.document.positions !== 'exact') {
    return judged('not-evidence', `${run}: positions are estimated (the protocol ran without --tokenizer), so whether the needle sat past the native window is not known; re-run with the deployment's tokenizer`)
  }
  const foreign = r.ledger.reuses.find((x) => !x.sameGeometry)
  if (r.refused !== null || r.ledger.outcome === 'reused-seed') {
    const shared = foreign === undefined ? '' : `: the document shares its first ${foreign.sharedBlocks} block(s) with ${JSON.stringify(foreign.label)}, cached under another geometry ${short(foreign.geometry)}`
    return judged('fail', `reused seed ${r.seed}${shared}; the decoder could serve those blocks from the old geometry, so the run was refused and proves nothing; use a fresh seed`)
  }
  if (r.ledger.outcome === 'reused-same-geometry') {
    const same = r.ledger.reuses[0]
    return judged('fail', `not a fresh seed: seed ${r.seed}'s document shares its first ${same?.sharedBlocks ?? '?'} block(s) with ${JSON.stringify(same?.label ?? '?')} under this geometry, so those tokens came from the decoder's cache, not from this run's bridge; use a fresh seed`)
  }
  if (asked === undefined) return judged('not-evidence', `${run}: the question asks for a key no needle holds, so there is nothing to retrieve`)
  if (asked.position < ctx.original) {
    return judged('not-evidence', `${run}: the needle is inside the native window (positions 0..${fmt(ctx.original - 1)}, original_max_position_embeddings ${fmt(ctx.original)}), so it does not test the window change`)
  }
  const b = r.bridged
  if (b === null) return judged('fail', `${run}: no bridged leg (only the decoder alone was asked), so nothing went through the bridge`)
  if (b.verdictKind === 'declined') return judged('fail', `${run}: not bridged, verdict "${b.verdict}"; the decoder prefilled the prompt itself and answered ${JSON.stringify(b.answer)}, which is never a bridged pass`)
  if (b.verdictKind === 'partial') return judged('fail', `${run}: bridged only in part, verdict "${b.verdict}"; the decoder prefilled the rest itself, which is never a bridged pass`)
  if (askedNeedleBridged(r) !== true) return judged('not-evidence', `${run}: past the ${fmt(b.bridgedTokens)} bridged tokens, so the decoder, not the bridge, computed the cache entries that carry it`)
  if (!b.hit) {
    const budget = r.answerBudget.belowMinimum ? ` (with an answer budget of ${r.answerBudget.maxTokens} tokens, below the minimum)` : ''
    return judged('fail', `${run}: MISS through the bridge (verdict complete, ${fmt(b.bridgedTokens)} tokens bridged): answered ${JSON.stringify(b.answer)}, expected ${JSON.stringify(r.expected)}${budget}`)
  }
  const fresh = freshness ?? `fresh seed (ledger ${r.ledger.file})`
  return judged('pass', `${run}, past the native window ${fmt(ctx.original)} and inside the ${fmt(b.bridgedTokens)} bridged tokens: verdict complete, answered ${JSON.stringify(b.answer)}; ${fresh}`)
}

/** A record file as given: parsed, or the problem that kept it from being read. */
export interface NeedleEvidenceFile {
  file: string
  record?: NeedleRunRecord
  problem?: string
}

async function readRecordFile (file: string): Promise<NeedleEvidenceFile> {
  let text: string
  try {
    text = await readFile(file, 'utf8')
  }
  catch (e) {
    return { file, problem: `cannot be read: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}` }
  }
  let json: unknown
  try {
    json = JSON.parse(text)
  }
  catch (e) {
    return { file, problem: `not JSON: ${(e as Error).message}` }
  }
  try {
    return { file, record: parseNeedleRecord(json, file) }
  }
  catch (e) {
    if (!(e instanceof PdBridgeError)) throw e
    // parseNeedleRecord names the file first; the finding names it already.
    return { file, problem: e.message.startsWith(`${file}: `) ? e.message.slice(file.length + 2) : e.message }
  }
}

/**
 * Every record named: a file is one record; a directory is every `*.json` in it, by name. A path
 * that cannot be read, an empty directory, or a file that is not a valid record is a problem; the
 * other records are still read.
 */
export async function readNeedleEvidence (paths: readonly string[]): Promise<NeedleEvidenceFile[]> {
  const out: NeedleEvidenceFile[] = []
  for (const given of paths) {
    const path = resolve(given)
    let isDir: boolean
    try {
      isDir = (await stat(path)).isDirectory()
    }
    catch (e) {
      out.push({ file: path, problem: `cannot be read: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}` })
      continue
    }
    if (!isDir) {
      out.push(await readRecordFile(path))
      continue
    }
    const names = (await readdir(path)).filter((n) => n.endsWith('.json')).sort()
    if (names.length === 0) out.push({ file: path, problem: 'holds no *.json needle records' })
    for (const name of names) out.push(await readRecordFile(join(path, name)))
  }
  return out
}

/** A live run against the front door. */
export interface LiveNeedleOptions {
  /** The bridged front door. */
  url: string
  /** The decoder alone (a native leg for context). */
  nativeUrl?: string
  /** The document seed; default a fresh random one. */
  seed?: number
  /** The document's length in tokens; default defaultNeedleTokens. */
  tokens?: number
  /** The seed ledger; without one, a throwaway ledger (a fresh random seed is fresh by construction). */
  ledger?: string
  /** The model id to ask for; default the first one the front door lists. */
  model?: string
  /** The decoder's checkpoint directory: its tokenizer builds the document. */
  tokenizerDir: string
  /** The decoder's block size when the front door does not report it. */
  blockSize: number
  /** max_tokens of each leg. */
  budget: number
  /** The longest document plus answer every table covers. */
  limit: number
  legTimeoutMs?: number
  /** Where the run record is written (as protocols/needle.mjs writes it); none when absent. */
  recordDir?: string
}

async function firstModel (url: string): Promise<string | undefined> {
  try {
    const res = await fetch(`${url.replace(/\/+$/, '')}/v1/models`, { headers: authHeaders(apiKeyFromEnv()), signal: AbortSignal.timeout(10_000) })
    const json = await res.json() as { data?: Array<{ id?: unknown }> }
    return typeof json?.data?.[0]?.id === 'string' ? json.data[0].id : undefined
  }
  catch {
    return undefined
  }
}

/** The outcome of a live run: its record, judged, or why it could not run. */
export interface LiveNeedleOutcome {
  judgement?: NeedleJudgement
  /** Why no run happened (bad length, given seed without a ledger, an unreachable front door). */
  problem?: string
  /** Notes for the report (a geometry the front door did not report). */
  notes: string[]
  /** The record file, when written. */
  file?: string
}

/**
 * Build one needle document with the decoder's tokenizer (the needle at depth 1, at least
 * needleMinDistance tokens from the end), run it against the front door (and the decoder alone)
 * with runNeedle under the front door's reported geometry, and judge the record.
 */
export async function runLiveNeedle (o: LiveNeedleOptions, ctx: NeedleLawContext): Promise<LiveNeedleOutcome> {
  const notes: string[] = []
  if (o.seed !== undefined && o.ledger === undefined) {
    return { notes, problem: `--needle-seed ${o.seed} without --ledger: a chosen seed can be shown fresh only against the ledger of earlier runs; give --ledger FILE, or leave out --needle-seed for a fresh random seed` }
  }
  let geometry: DeploymentGeometry
  try {
    geometry = await discoverGeometry({ frontUrl: o.url, timeoutMs: 10_000 })
  }
  catch (e) {
    if (!(e instanceof PdBridgeError)) throw e
    geometry = { fingerprint: ctx.geometry.key, source: 'flag', store: ctx.geometry.store, sidecar: ctx.geometry.sidecar, label: 'the window gate\'s own key (the front door reports none)', blockSize: null }
    notes.push(`${o.url}/health reports no geometry (links.store.geometry_fingerprint); the run is filed under the gate's own key ${short(ctx.geometry.key)}`)
  }
  const blockSize = geometry.blockSize ?? o.blockSize
  const minDistance = needleMinDistance(blockSize)
  const tokens = o.tokens ?? defaultNeedleTokens(ctx.original, blockSize)
  if (tokens - minDistance < ctx.original) {
    return { notes, problem: `a ${fmt(tokens)}-token document keeps its needle at least ${fmt(minDistance)} tokens from the end, so at or before position ${fmt(tokens - minDistance)}: not past the native window ${fmt(ctx.original)}; give --needle-tokens of at least ${fmt(ctx.original + minDistance)}` }
  }
  if (tokens + o.budget > o.limit) {
    return { notes, problem: `a ${fmt(tokens)}-token document with a ${fmt(o.budget)}-token answer runs past the shortest table (${fmt(o.limit)} positions)` }
  }
  const scratch = o.ledger === undefined ? await mkdtemp(join(tmpdir(), 'pd-bridge-gate-ledger-')) : undefined
  try {
    const tokenizer = await loadTokenizer(o.tokenizerDir)
    const seed = o.seed ?? freshInvocationSeed()
    const plan = planNeedles(seed, 1, 1)
    const document = buildNeedleDocument({ seed, targetTokens: tokens, needles: plan.needles, ask: plan.ask, tokenizer, minDistance })
    const ledger = await SeedLedger.open(o.ledger === undefined ? join(scratch!, 'ledger.json') : resolve(o.ledger))
    const record = await runNeedle({
      document,
      cell: { targetTokens: tokens, depth: 1, repeat: 0 },
      invocationSeed: seed,
      environment: remoteEnvironment(o.url),
      model: o.model ?? (await firstModel(o.url)) ?? 'default',
      frontUrl: o.url,
      nativeUrl: o.nativeUrl,
      budget: answerBudget(o.budget),
      ledger,
      geometry,
      blockSize,
      legTimeoutMs: o.legTimeoutMs ?? 600_000,
    })
    const file = o.recordDir === undefined ? undefined : await writeNeedleRecord(o.recordDir, record)
    const freshness = o.ledger === undefined
      ? 'fresh random seed (no --ledger: fresh by construction, not checked against earlier runs)'
      : `fresh seed (not in the ledger ${ledger.file}; recorded there now)`
    return { notes, judgement: judgeNeedleRun(record, ctx, o.url, freshness), file }
  }
  catch (e) {
    // No tokenizer, a document that cannot be built, a leg that fails: a problem of this run.
    if (!(e instanceof PdBridgeError)) throw e
    return { notes, problem: e.message }
  }
  finally {
    if (scratch !== undefined) await rm(scratch, { recursive: true, force: true })
  }
}

/** The gate's needle evidence. */
export interface NeedleLawOptions {
  /** The front door for a live run. */
  url?: string
  nativeUrl?: string
  seed?: number
  tokens?: number
  /** Record files or directories from protocols/needle.mjs. */
  records?: readonly string[]
  ledger?: string
  model?: string
  legTimeoutMs?: number
  recordDir?: string
  /** Set when the gate chose the live run itself (no evidence was given): said on each of its findings. */
  selfRun?: string
}

/** What the gate knows to judge with; `why` instead when it cannot know it. */
export type NeedleLawSetup =
  | { ok: true, ctx: NeedleLawContext, tokenizerDir: string, blockSize: number, budget: number, limit: number }
  | { ok: false, why: string }

/** The needle check's findings, runs and files written. */
export interface NeedleLawResult {
  findings: Finding[]
  runs: NeedleJudgement[]
  written: string[]
}

/** The message of a gate with no evidence at all. */
export const NO_NEEDLE_EVIDENCE = 'no needle pass through the bridge above the native window; give --needle-url or --needle-record'

/**
 * The needle check: judge every record and the live run. It passes when at least one run is a
 * bridged pass and no run is a failure of the bridge; runs that are no evidence (another geometry,
 * inside the native window) are warnings beside a pass and failures without one.
 */
export async function checkNeedleLaw (o: NeedleLawOptions, setup: NeedleLawSetup): Promise<NeedleLawResult> {
  const findings: Finding[] = []
  const runs: NeedleJudgement[] = []
  const written: string[] = []
  const finding = (status: Finding['status'], message: string, file?: string): void => {
    findings.push({ check: 'needle', rule: 'needle-law', status, ...(file !== undefined ? { file } : {}), message })
  }
  const records = o.records ?? []
  if (o.url === undefined && records.length === 0) {
    if (o.nativeUrl !== undefined) finding('fail', `${NO_NEEDLE_EVIDENCE} (--needle-native-url alone asks the decoder, not the bridge)`)
    else finding('fail', NO_NEEDLE_EVIDENCE)
    return { findings, runs, written }
  }
  if (!setup.ok) {
    finding('fail', `cannot be judged: ${setup.why}`)
    return { findings, runs, written }
  }
  // Findings in the order the evidence was given: records first, then the live run.
  const order: Array<{ run: NeedleJudgement } | { said: Finding }> = []
  for (const f of await readNeedleEvidence(records)) {
    if (f.record === undefined) order.push({ said: { check: 'needle', rule: 'needle-law', status: 'fail', file: f.file, message: `not a needle record: ${f.problem ?? 'unreadable'}` } })
    else order.push({ run: judgeNeedleRun(f.record, setup.ctx, f.file) })
  }
  if (o.url !== undefined) {
    const live = await runLiveNeedle({ ...o, url: o.url, tokenizerDir: setup.tokenizerDir, blockSize: setup.blockSize, budget: setup.budget, limit: setup.limit }, setup.ctx)
    for (const note of live.notes) order.push({ said: { check: 'needle', rule: 'needle-law', status: 'warn', file: o.url, message: note } })
    if (live.file !== undefined) written.push(live.file)
    if (live.judgement !== undefined) order.push({ run: live.judgement })
    else order.push({ said: { check: 'needle', rule: 'needle-law', status: 'fail', file: o.url, message: `no live needle run: ${live.problem ?? 'unknown'}` } })
  }
  for (const item of order) if ('run' in item) runs.push(item.run)
  const anyPass = runs.some((r) => r.status === 'pass')
  for (const item of order) {
    if ('said' in item) {
      findings.push(item.said)
      continue
    }
    const r = item.run
    const status = r.status === 'pass' ? 'pass' : r.status === 'fail' ? 'fail' : anyPass ? 'warn' : 'fail'
    const head = r.status === 'pass'
      ? 'bridged pass above the native window'
      : r.status === 'fail' ? 'not a bridged pass above the native window' : 'no evidence for the needle law'
    finding(status, `${head}: ${r.reason}; ${r.native}`, r.source)
  }
  if (o.selfRun !== undefined) for (const f of findings) if (f.file === o.url) f.message += `; ${o.selfRun}`
  return { findings, runs, written }
}

// The demo's result table: what was asked, what the bridge said, how long each part took, and the
// three checks (verdict, answers, blocks) that decide the exit code.
import type { DemoChecks } from '../../decoders/demo-checks.ts'
import { decoderKind } from '../../decoders/registry.ts'
import type { LegResult } from './legs.ts'

/** Everything the table shows; the cache check's fields (DemoChecks) are the decoder kind's. */
export interface DemoSummary extends DemoChecks {
  preset: string
  checkpointSeed: number
  blockSize: number
  /** The prefill engine's profile (the decoder's is EMBEDDED_DECODER_PROFILE). */
  prefillProfile: string
  promptSeed: number
  promptTokens: number
  codeWord: string
  bridged: LegResult
  native: LegResult
  answersMatch: boolean
  /** Which decoder kind ran: its record compares the caches and words the rows. */
  decoder: string
}

/** Preferred order and names of the front door's stage timings; other keys follow as they are. */
const STAGES: Array<[string, string]> = [
  ['queue', 'bridge queue'],
  ['submit', 'submit'],
  ['engine_queue', 'engine queue'],
  ['engine_prefill', 'engine prefill'],
  ['capture', 'capture (prefill + stream)'],
  ['first_layer', 'first layer'],
  ['transfer', 'transfer'],
  ['assembly', 'assembly'],
  ['block_write', 'block write'],
  ['block_stage', 'block stage'],
  ['rescan', 'rescan'],
  ['bridge_total', 'bridge total'],
  ['decoder_ttft', 'decoder TTFT'],
  ['decoder_total', 'decoder'],
  ['total', 'front door total'],
]

function seconds (ms: number): string {
  return `${(ms / 1000).toFixed(2)} s`
}

function n (x: number): string {
  return x.toLocaleString('en-US')
}

/** The stage timings as "name time" items in a stable order. */
export function stageItems (timings: Record<string, unknown> | undefined): string[] {
  if (timings === undefined) return []
  const items: string[] = []
  const seen = new Set<string>()
  for (const [key, label] of STAGES) {
    const v = timings[key]
    if (typeof v === 'number') items.push(`${label} ${seconds(v)}`)
    seen.add(key)
  }
  for (const [key, v] of Object.entries(timings)) {
    if (!seen.has(key) && typeof v === 'number') items.push(`${key.replace(/_/g, ' ')} ${seconds(v)}`)
  }
  return items
}

/** The three checks: true when the demo passed. */
export function demoPassed (s: DemoSummary): boolean {
  return s.bridged.verdict === 'complete' && s.answersMatch && decoderKind(s.decoder).demo.problem(s) === ''
}

/** The table as text. */
export function renderDemoTable (s: DemoSummary): string {
  const full = Math.floor(s.promptTokens / s.blockSize)
  const bridgedTokens = typeof s.bridged.bridge?.bridged_tokens === 'number' ? s.bridged.bridge.bridged_tokens : undefined
  const timings = (s.bridged.bridge?.timings_ms ?? undefined) as Record<string, unknown> | undefined
  const stages = stageItems(timings)
  const demo = decoderKind(s.decoder).demo
  const ratio = s.native.ms > 0 ? s.bridged.ms / s.native.ms : NaN
  const rows: Array<[string, string]> = [
    ['model', `${s.preset} (checkpoint seed ${s.checkpointSeed}), ${demo.modelNote}decoder blocks of ${s.blockSize} tokens, prefill engine profile ${s.prefillProfile}`],
    ['prompt', `fresh seed ${s.promptSeed}: a document with code word ${s.codeWord}`],
    ['prompt tokens', `${n(s.promptTokens)} (${full} full block${full === 1 ? '' : 's'}, ${n(s.promptTokens - full * s.blockSize)} in the tail)`],
    ['verdict', `${s.bridged.verdict ?? '(no X-PD-Bridge header)'}${bridgedTokens !== undefined ? ` (${n(bridgedTokens)} tokens bridged)` : ''}`],
    ['cached tokens', `bridged ${n(s.bridged.cachedTokens)}, native ${n(s.native.cachedTokens)}`],
    ['stages (bridged)', stages.length > 0 ? stages.slice(0, 4).join(', ') : '(the front door reported no stage timings)'],
    ...stages.slice(4).reduce<Array<[string, string]>>((acc, _item, i, all) => (i % 4 === 0 ? [...acc, ['', all.slice(i, i + 4).join(', ')]] : acc), []),
    ['bridged time', `${seconds(s.bridged.ms)} through the front door`],
    ['native time', `${seconds(s.native.ms)} on ${demo.nativeLeg}${Number.isFinite(ratio) ? ` (bridged / native = ${ratio.toFixed(2)})` : ''}`],
    ['answers match', s.answersMatch ? `yes: ${s.bridged.completionTokens} identical tokens` : `NO: bridged ${JSON.stringify(s.bridged.text.slice(0, 60))}, native ${JSON.stringify(s.native.text.slice(0, 60))}`],
    ...demo.rows(s),
  ]
  const width = Math.max(...rows.map(([k]) => k.length))
  const lines = rows.map(([k, v]) => `  ${k.padEnd(width)}  ${v}`)
  const verdict = demoPassed(s)
    ? demo.passLine
    : 'FAIL: ' + [
      s.bridged.verdict !== 'complete' ? `verdict is ${s.bridged.verdict ?? 'missing'}, not complete` : '',
      !s.answersMatch ? 'the answers differ' : '',
      demo.problem(s),
    ].filter((x) => x !== '').join('; ')
  return `\npd-bridge demo\n${lines.join('\n')}\n\n${verdict}\n`
}

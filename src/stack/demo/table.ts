// The demo's result table: what was asked, what the bridge said, how long each part took, and the
// three checks (verdict, answers, blocks) that decide the exit code.
import { sectionDistanceLine } from '../../engines/llama-cpp/state/index.ts'
import type { PromptBlocksCheck } from './blocks.ts'
import type { LegResult } from './legs.ts'
import type { PromptStatesCheck } from './states.ts'

/** Everything the table shows. */
export interface DemoSummary {
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
  /** Which decoder ran: ours (blocks compared with verify-blocks) or llama.cpp (states compared). */
  decoder: 'ours' | 'llama.cpp'
  blocks?: PromptBlocksCheck
  states?: PromptStatesCheck
  /** The same comparison as a command the user can run again (ours). */
  verifyCommand?: string
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
  return s.bridged.verdict === 'complete' && s.answersMatch && cacheProblem(s) === ''
}

/** Why the third check fails ('' when it holds): blocks identical (ours), both states present and compared (llama.cpp). */
function cacheProblem (s: DemoSummary): string {
  if (s.decoder === 'llama.cpp') {
    const st = s.states
    if (st === undefined) return 'no state comparison'
    if (st.missing.length > 0) return `no state file at the bridged boundary in the ${st.missing.join(' and ')} store`
    return st.sections.length === 0 ? 'no state sections compared' : ''
  }
  const r = s.blocks?.report
  if (r === undefined) return 'no block comparison'
  return r.total === 0 ? 'no blocks to compare' : r.identical !== r.total ? `${r.total - r.identical} of ${r.total} blocks differ` : ''
}

/** The rows of the cache check: verify-blocks for ours, the state's sections for llama.cpp. */
function cacheRows (s: DemoSummary): Array<[string, string]> {
  if (s.decoder === 'llama.cpp') {
    const st = s.states
    if (st === undefined) return [['state vs llama.cpp', '(not compared)']]
    if (st.missing.length > 0) return [['state vs llama.cpp', `missing in the ${st.missing.join(' and ')} store at ${n(st.boundary)} tokens`]]
    const values = st.sections.reduce((a, d) => a + d.values, 0)
    const identical = st.sections.reduce((a, d) => a + d.identical, 0)
    const worst = Math.max(0, ...st.sections.map((d) => d.maxUlp))
    return [
      ['state vs llama.cpp', `after ${n(st.boundary)} tokens, bridge-built vs llama.cpp's own: ${n(identical)}/${n(values)} values identical (${(100 * identical / Math.max(1, values)).toFixed(2)}%), worst ${n(worst)} ulp`],
      ...st.sections.map((d): [string, string] => ['', sectionDistanceLine(d)]),
    ]
  }
  const b = s.blocks
  if (b === undefined) return [['verify-blocks', '(not compared)']]
  const missing = [
    b.missingBridged.length > 0 ? `${b.missingBridged.length} missing from the bridged store` : '',
    b.missingNative.length > 0 ? `${b.missingNative.length} missing from the native store` : '',
  ].filter((x) => x !== '')
  return [
    ['verify-blocks', `${b.report.identical}/${b.report.total} identical${missing.length > 0 ? ` (${missing.join(', ')})` : ''}`],
    ['', s.verifyCommand ?? ''],
  ]
}

/** The table as text. */
export function renderDemoTable (s: DemoSummary): string {
  const full = Math.floor(s.promptTokens / s.blockSize)
  const bridgedTokens = typeof s.bridged.bridge?.bridged_tokens === 'number' ? s.bridged.bridge.bridged_tokens : undefined
  const timings = (s.bridged.bridge?.timings_ms ?? undefined) as Record<string, unknown> | undefined
  const stages = stageItems(timings)
  const ratio = s.native.ms > 0 ? s.bridged.ms / s.native.ms : NaN
  const rows: Array<[string, string]> = [
    ['model', `${s.preset} (checkpoint seed ${s.checkpointSeed}), ${s.decoder === 'llama.cpp' ? 'decoder llama.cpp (f32 GGUF, F32 cache), ' : ''}decoder blocks of ${s.blockSize} tokens, prefill engine profile ${s.prefillProfile}`],
    ['prompt', `fresh seed ${s.promptSeed}: a document with code word ${s.codeWord}`],
    ['prompt tokens', `${n(s.promptTokens)} (${full} full block${full === 1 ? '' : 's'}, ${n(s.promptTokens - full * s.blockSize)} in the tail)`],
    ['verdict', `${s.bridged.verdict ?? '(no X-PD-Bridge header)'}${bridgedTokens !== undefined ? ` (${n(bridgedTokens)} tokens bridged)` : ''}`],
    ['cached tokens', `bridged ${n(s.bridged.cachedTokens)}, native ${n(s.native.cachedTokens)}`],
    ['stages (bridged)', stages.length > 0 ? stages.slice(0, 4).join(', ') : '(the front door reported no stage timings)'],
    ...stages.slice(4).reduce<Array<[string, string]>>((acc, _item, i, all) => (i % 4 === 0 ? [...acc, ['', all.slice(i, i + 4).join(', ')]] : acc), []),
    ['bridged time', `${seconds(s.bridged.ms)} through the front door`],
    ['native time', `${seconds(s.native.ms)} on ${s.decoder === 'llama.cpp' ? 'a llama.cpp decoder with an empty state store' : 'a decoder with an empty block store'}${Number.isFinite(ratio) ? ` (bridged / native = ${ratio.toFixed(2)})` : ''}`],
    ['answers match', s.answersMatch ? `yes: ${s.bridged.completionTokens} identical tokens` : `NO: bridged ${JSON.stringify(s.bridged.text.slice(0, 60))}, native ${JSON.stringify(s.native.text.slice(0, 60))}`],
    ...cacheRows(s),
  ]
  const width = Math.max(...rows.map(([k]) => k.length))
  const lines = rows.map(([k, v]) => `  ${k.padEnd(width)}  ${v}`)
  const verdict = demoPassed(s)
    ? s.decoder === 'llama.cpp'
      ? 'PASS: verdict complete, answers identical to llama.cpp\'s own prefill, the bridged state compared with llama.cpp\'s'
      : 'PASS: verdict complete, answers identical, every bridged block identical to the native decoder\'s'
    : 'FAIL: ' + [
      s.bridged.verdict !== 'complete' ? `verdict is ${s.bridged.verdict ?? 'missing'}, not complete` : '',
      !s.answersMatch ? 'the answers differ' : '',
      cacheProblem(s),
    ].filter((x) => x !== '').join('; ')
  return `\npd-bridge demo\n${lines.join('\n')}\n\n${verdict}\n`
}

// One environment's two-host protocol runs for the report (protocols/two-hosts.mjs, docs/two-hosts.md),
// as plain data so RESULTS.md and report.html say the same thing: a headline (cold prompts complete
// with the decoder alone's answer; link faults answered correctly, wrong answers, half-written
// files), the links as applied, what crossed them against bytes / link rate, the stage table the
// embedded stack's demo prints, and the newest run's link faults.
import { stageItems } from '../../src/stack/demo/table.ts'
import { FAULT_HEADERS, faultRow } from './faults-section.ts'
import { groupDigits, plural, seconds, NOT_RUN, type Table } from './table.ts'
import type { TwoHostRecord, TwoHostRun } from './two-host-record.ts'

/** One environment's two-host runs, in start order. */
export interface TwoHostSummary {
  runs: TwoHostRecord[]
}

/** The environment's two-host runs sorted by startedAt then runId (null when there are none). */
export function summarizeTwoHost (records: readonly TwoHostRecord[]): TwoHostSummary | null {
  if (records.length === 0) return null
  return { runs: [...records].sort((a, b) => a.startedAt.localeCompare(b.startedAt) || a.runId.localeCompare(b.runId)) }
}

/** Half-written files a fault left (store temporaries and spool entries), from its details. */
export function halfWritten (details: Record<string, unknown>): number {
  return typeof details.half_written === 'number' ? details.half_written : 0
}

/** A cold prompt's fetched bytes over bytes / link rate as a percentage of the link's rate. */
export function linkShare (run: TwoHostRun): number | null {
  return run.transferMs > 0 ? (100 * run.idealTransferMs) / run.transferMs : null
}

/** The headline: `two hosts: 4/4 cold prompts complete with the decoder alone's answer; link faults: 5/5 answered correctly, 0 wrong answers, 0 half-written files; 2 skipped (...)`. */
export function twoHostHeadline (summary: TwoHostSummary): string {
  const runs = summary.runs.flatMap((r) => r.runs)
  const good = runs.filter((r) => r.verdict === 'complete' && r.answersAgree).length
  const words = [`two hosts: ${good}/${runs.length} cold prompts complete with the decoder alone's answer`]
  const newest = newestFaults(summary).map((x) => x.fault)
  if (newest.length > 0) {
    const injected = newest.filter((f) => f.skipped === null)
    const wrong = injected.filter((f) => f.answer_equals_native === false).length
    const half = injected.reduce((a, f) => a + halfWritten(f.details) + f.corrupt_blocks_indexed, 0)
    words.push(`link faults (newest record of each): ${injected.filter((f) => f.correct).length}/${injected.length} answered correctly, ${plural(wrong, 'wrong answer')}, ${plural(half, 'half-written or corrupt file')}`)
    const skipped = newest.filter((f) => f.skipped !== null)
    if (skipped.length > 0) words.push(`${skipped.length} skipped (${skipped.map((f) => f.name).join(', ')}: ${skipped[0].skipped})`)
  }
  return words.join('; ')
}

function gbit (bps: number): string {
  return `${(bps / 1e9).toFixed(2)} Gbit/s`
}

function mb (bytes: number): string {
  return `${(bytes / 1e6).toFixed(2)} MB`
}

/** One row per record: the link as asked for and as applied, and what a bulk transfer got across it. */
export function linkTable (summary: TwoHostSummary): Table {
  return {
    title: 'Two hosts: the links',
    headers: ['run', 'across', 'profile', 'rate', 'delay', 'loss', 'netem', 'bulk TCP probe', 'probe / rate', 'load average'],
    rows: summary.runs.map((r) => [
      r.runId, r.link.across, r.link.profile, gbit(r.link.rateBitsPerSecond),
      r.link.netem ? `${r.link.delayMs} ms` : `none (asked ${r.link.delayMs} ms)`,
      r.link.netem ? `${r.link.lossPercent}%` : `none (asked ${r.link.lossPercent}%)`,
      r.link.netem ? 'applied' : `missing: ${r.link.netemMissing ?? 'not applied'}`,
      `${mb(r.link.probe.bytes)} in ${seconds(r.link.probe.ms)} (${gbit(r.link.probe.bitsPerSecond)})`,
      `${((100 * r.link.probe.bitsPerSecond) / r.link.rateBitsPerSecond).toFixed(0)}%`,
      r.settings.loadAverage.join(' '),
    ]),
  }
}

/** One row per cold prompt: what crossed the link, against the minimum and against bytes / link rate. */
export function transferTable (summary: TwoHostSummary): Table {
  return {
    title: 'Two hosts: cold prompts across the link',
    headers: ['link', 'prompt tokens', 'verdict', 'answers', 'fetched', 'fetched per token', 'minimum per token (blocks)', 'on the wire',
      'transfer', 'bytes / link rate', 'of the link rate', 'bridged end to end', 'decoder alone'],
    rows: summary.runs.flatMap((r) => r.runs.map((run) => {
      const share = linkShare(run)
      const perToken = (b: number): string => run.bridgedTokens > 0 ? `${groupDigits(b / run.bridgedTokens)} B` : NOT_RUN
      return [
        r.link.profile, groupDigits(run.promptTokens), run.verdict, run.answersAgree ? 'equal' : 'differ', mb(run.fetchedBytes),
        perToken(run.fetchedBytes), perToken(run.blockBytes), mb(run.wireBytes), seconds(run.transferMs), `${run.idealTransferMs.toFixed(1)} ms`,
        share === null ? NOT_RUN : `${share.toFixed(1)}%`, seconds(run.bridgedMs), seconds(run.nativeMs),
      ]
    })),
  }
}

/** One row per cold prompt: the front door's stages, as the demo's table names them. */
export function twoHostStageTable (summary: TwoHostSummary): Table {
  return {
    title: 'Two hosts: stages of each bridge',
    headers: ['link', 'prompt tokens', 'stages'],
    rows: summary.runs.flatMap((r) => r.runs.map((run) => [r.link.profile, groupDigits(run.promptTokens), stageItems(run.stagesMs).join(', ')])),
  }
}

/**
 * The link faults, the newest record of each: one row each, with what added the loss or delay (netem, nftables, the
 * userspace relay; none for the other faults) and the half-written files the store and spool held after it.
 */
export function linkFaultTable (summary: TwoHostSummary): Table | null {
  const newest = newestFaults(summary)
  if (newest.length === 0) return null
  return {
    title: 'Two hosts: link faults (the newest record of each fault; its run, link and stall deadline in the last columns)',
    headers: [...FAULT_HEADERS, 'loss or delay by', 'run (link, stall deadline)', 'half-written files'],
    rows: newest.map(({ fault: f, run: r }) => [...faultRow(f), typeof f.details.mechanism === 'string' ? f.details.mechanism : NOT_RUN,
      `${r.runId} (${r.link.profile}, ${seconds(r.settings.stallMs)})`, f.skipped === null ? String(halfWritten(f.details)) : NOT_RUN]),
  }
}

/**
 * Each fault's newest record, in the order the faults first appear: the newest run that injected
 * it, or, for a fault never injected, the newest run that skipped it (a run of some faults only
 * does not hide the others' results, and a later skip does not hide an earlier measurement).
 */
export function newestFaults (summary: TwoHostSummary): Array<{ fault: TwoHostRecord['faults'][number], run: TwoHostRecord }> {
  const byName = new Map<string, { fault: TwoHostRecord['faults'][number], run: TwoHostRecord }>()
  for (const run of summary.runs) {
    for (const fault of run.faults) {
      const seen = byName.get(fault.name)
      if (seen === undefined || fault.skipped === null || seen.fault.skipped !== null) byName.set(fault.name, { fault, run })
    }
  }
  return [...byName.values()]
}

/** The section's tables in report order. */
export function twoHostTables (summary: TwoHostSummary): Table[] {
  const faults = linkFaultTable(summary)
  return [linkTable(summary), transferTable(summary), twoHostStageTable(summary), ...(faults === null ? [] : [faults])]
}

/** The rule under the report's counting rules. */
export const TWO_HOST_RULE = 'Two hosts (protocols/two-hosts.mjs, docs/two-hosts.md): the prefill side (prefill-engine, share) and the decode side (decoder, front door) run in two network namespaces joined by one veth link shaped with tc (a token bucket at the profile\'s rate; netem\'s delay and loss only where the kernel has netem, and the link table says when it did not). Without netem the loss faults drop packets with nftables (numgen random drop on each host\'s input from the link) and the delay fault sends the front door through userspace relays that hold every chunk the delay in each direction (not per packet); the link faults table says which ("loss or delay by"). "Transfer" is the share client\'s download time; "bytes / link rate" is the fetched bytes at the nominal rate, and "of the link rate" their quotient. "On the wire" is what the prefill host\'s end sent during the bridge (tc\'s counter: payload, HTTP, TCP, IP). The bulk TCP probe is one plain TCP transfer across the same link: when it falls short of the rate, the link is CPU-bound on this machine. A link fault is answered correctly only when the answer equals the decoder alone\'s, nothing corrupt or half-written is left in the store or the spool, and a later cold prompt bridges complete again.'

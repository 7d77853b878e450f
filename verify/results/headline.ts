// The lines a reader sees first (issue #44): one per rung and decoder kind, environments named by
// what they are (prefill engine and GPU, decoder kind, cores), never by hash; GPU runs, CPU-only
// runs and needle runs apart. Each cold-prompt line is the largest prompt size with a paired run
// (both legs, verdict complete) and that size's median ratio, beside the two legs' median times
// over those same paired runs (a bridged-only run at that size moves neither); where several
// environments of the same route have it, the one with the newest run speaks (older ones stay in
// their sections).
import { escapeXml } from './charts.ts'
import { describeRoute, type Route } from './environment.ts'
import type { EnvironmentSummary, SizeSummary } from './summary.ts'

/** The headline, in three groups; each line plain text (Markdown-safe). */
export interface Headline {
  gpu: string[]
  cpu: string[]
  needle: string[]
}

/** `32768` as `32K`, `1000032` as `1M`: the rung's size as people say it (binary K below a million). */
export function sizeLabel (tokens: number): string {
  if (tokens >= 1_000_000) return `${Math.round(tokens / 1_000_000)}M`
  return `${Math.round(tokens / 1024)}K`
}

function seconds (ms: number | null): string {
  return ms === null ? '—' : `${(ms / 1000).toFixed(1)} s`
}

function newestRun (env: EnvironmentSummary): string {
  return env.sizes.flatMap((s) => s.points.map((p) => p.runId)).sort().at(-1) ?? ''
}

function routeText (r: Route): string {
  return `${r.prefill} -> ${r.decoder} (${r.model})`
}

function coldLine (route: Route, best: SizeSummary, others: SizeSummary[]): string {
  const ratio = best.ratio!
  const more = others.length === 0 ? '' : `; also ${others.map((s) => `${s.ratio!.toFixed(1)}x at ${sizeLabel(s.promptTokens ?? s.targetTokens)}`).join(', ')}`
  return `${routeText(route)}: ${ratio.toFixed(1)}x at ${sizeLabel(best.promptTokens ?? best.targetTokens)} (alone ${seconds(best.pairedNativeMs)}, bridged ${seconds(best.pairedBridgedMs)}; ${best.pairs} paired run${best.pairs === 1 ? '' : 's'}${more})`
}

/** The headline of a report's environments. */
export function headlineOf (envs: readonly EnvironmentSummary[]): Headline {
  const byRoute = new Map<string, { route: Route, envs: EnvironmentSummary[] }>()
  for (const env of envs) {
    if (!env.sizes.some((s) => s.ratio !== null)) continue
    const route = describeRoute(env.environment)
    const key = routeText(route)
    const g = byRoute.get(key) ?? { route, envs: [] }
    g.envs.push(env)
    byRoute.set(key, g)
  }
  const out: Headline = { gpu: [], cpu: [], needle: [] }
  for (const { route, envs: group } of [...byRoute.values()].sort((a, b) => routeText(a.route).localeCompare(routeText(b.route)))) {
    const largest = Math.max(...group.flatMap((e) => e.sizes.filter((s) => s.ratio !== null).map((s) => s.targetTokens)))
    const speaker = group.filter((e) => e.sizes.some((s) => s.targetTokens === largest && s.ratio !== null)).sort((a, b) => newestRun(a).localeCompare(newestRun(b))).at(-1)!
    const paired = speaker.sizes.filter((s) => s.ratio !== null)
    const best = paired.find((s) => s.targetTokens === largest)!
    const line = coldLine(route, best, paired.filter((s) => s !== best))
    if (route.gpu) out.gpu.push(line)
    else out.cpu.push(line)
  }
  for (const env of envs) {
    const grid = env.needle
    if (grid === null) continue
    let pass = 0
    let runs = 0
    for (const row of grid.cells) {
      for (const c of row) {
        if (c === null) continue
        pass += c.bridged.pass
        runs += c.bridged.pass + c.bridged.miss
      }
    }
    if (runs === 0) continue
    const lengths = grid.lengths.length === 1 ? sizeLabel(grid.lengths[0]) : `${sizeLabel(grid.lengths[0])} to ${sizeLabel(grid.lengths.at(-1)!)}`
    out.needle.push(`${routeText(describeRoute(env.environment))}: needle found in ${pass}/${runs} bridged answers, prompts of ${lengths}`)
  }
  out.needle.sort()
  return out
}

/** The groups in the order a reader meets them, with their titles. */
const GROUPS: ReadonlyArray<[keyof Headline, string]> = [
  ['gpu', 'GPU prefill, decoder on CPU cores (decoder alone / bridged, cold prompts)'],
  ['cpu', 'CPU only (decoder alone / bridged, cold prompts)'],
  ['needle', 'Needle (found in bridged answers)'],
]

/** The headline as Markdown lines (a bold title per group that has lines). */
export function headlineMarkdown (h: Headline): string[] {
  return GROUPS.filter(([k]) => h[k].length > 0).flatMap(([k, title]) => [`**${title}**`, '', ...h[k].map((l) => `- ${l}`), ''])
}

/** The headline as HTML, the same groups and lines. */
export function headlineHtml (h: Headline, heading: string): string {
  const groups = GROUPS.filter(([k]) => h[k].length > 0).map(([k, title]) => `<h3>${escapeXml(title)}</h3><ul>${h[k].map((l) => `<li>${escapeXml(l)}</li>`).join('')}</ul>`)
  return `<section class="headline"><h2>${escapeXml(heading)}</h2>${groups.join('')}</section>`
}

// `pd-bridge results`: records in (cold runs, micro benchmarks, needle runs, fault runs, load runs, warm-extend runs), RESULTS.md +
// charts + heatmaps + report.html out.
import { mkdir, writeFile } from 'node:fs/promises'
import { dirname, join, resolve } from 'node:path'
import { needleHeatmapSvg } from '../needle/heatmap.ts'
import { readNeedleRecords } from '../needle/record.ts'
import { stageChart, timeChart } from './charts.ts'
import { costPerTokenChart } from './cost-chart.ts'
import { readFaultsRecords } from './fault-record.ts'
import { readLoadRecords } from './load-record.ts'
import { readLoadLevelsRecords } from './load-levels-record.ts'
import { readBatchRecords, type BatchRecord } from './batch-record.ts'
import { readMicroRecords } from './micro-record.ts'
import { readRunRecords } from './record.ts'
import { chartFiles, needleHeatmapFile, renderHtml, renderMarkdown } from './render.ts'
import { headlineMarkdown, headlineOf } from './headline.ts'
import { updateReadmeHeadline } from './readme-headline.ts'
import { reportSources } from './sources.ts'
import { summarize, type EnvironmentSummary } from './summary.ts'
import { readWarmRecords } from './warm-record.ts'
import { readTwoHostRecords } from './two-host-record.ts'
import { readAdversaryRecords } from './adversary-record.ts'

/** What the generator wrote. */
export interface GenerateResult {
  records: number
  microRecords: number
  needleRecords: number
  faultsRecords: number
  loadRecords: number
  /** Load-levels records (protocols/load.mjs's concurrency levels, `levels/` under the load directory). */
  loadLevelsRecords: number
  /** Batched-decode records (protocols/batch-decode.mjs). */
  batchRecords: number
  warmRecords: number
  twoHostRecords: number
  adversaryRecords: number
  environments: number
  /** Paths written, relative to the output directory. */
  files: string[]
}

/** Where micro-benchmark records live by default: `micro/` next to the run records' directory. */
export function defaultMicroDir (runsDir: string): string {
  return join(dirname(resolve(runsDir)), 'micro')
}

/** Where needle run records live by default: `needle/runs/` next to the run records' directory (protocols/needle.mjs's default). */
export function defaultNeedleDir (runsDir: string): string {
  return join(dirname(resolve(runsDir)), 'needle', 'runs')
}

/** Where fault protocol records live by default: `faults/` next to the run records' directory (protocols/faults.mjs's default). */
export function defaultFaultsDir (runsDir: string): string {
  return join(dirname(resolve(runsDir)), 'faults')
}

/** Where load protocol records live by default: `load/` next to the run records' directory (protocols/load.mjs's default). */
export function defaultLoadDir (runsDir: string): string {
  return join(dirname(resolve(runsDir)), 'load')
}

/** Where warm-extend protocol records live by default: `warm/` next to the run records' directory (protocols/warm-extend.mjs's default). */
export function defaultWarmDir (runsDir: string): string {
  return join(dirname(resolve(runsDir)), 'warm')
}

/** Where two-host protocol records live by default: `two-host/` next to the run records' directory (protocols/two-hosts.mjs's default). */
export function defaultTwoHostDir (runsDir: string): string {
  return join(dirname(resolve(runsDir)), 'two-host')
}

/** Where batched-decode protocol records live by default: `batch/` next to the run records' directory (protocols/batch-decode.mjs's default). */
export function defaultBatchDir (runsDir: string): string {
  return join(dirname(resolve(runsDir)), 'batch')
}

/** Where adversary protocol records live by default: `adversary/` next to the run records' directory (protocols/adversary.mjs's default). */
export function defaultAdversaryDir (runsDir: string): string {
  return join(dirname(resolve(runsDir)), 'adversary')
}

/**
 * Read every run record under `runsDir`, every micro-benchmark record under `microDir`, every
 * needle run record under `needleDir`, every fault protocol record under `faultsDir`, every
 * load protocol record under `loadDir`, every warm-extend protocol record under `warmDir` and every two-host protocol record under `twoHostDir`, and regenerate the report files under `outDir`. Charts
 * exist only for environments with runs (the cost chart only for those with complete bridged runs at 3 sizes or more), a heatmap only for those with needle records.
 */
export async function generateResults (runsDir: string, outDir: string, microDir: string = defaultMicroDir(runsDir), needleDir: string = defaultNeedleDir(runsDir),
  faultsDir: string = defaultFaultsDir(runsDir), loadDir: string = defaultLoadDir(runsDir), warmDir: string = defaultWarmDir(runsDir),
  twoHostDir: string = defaultTwoHostDir(runsDir), adversaryDir: string = defaultAdversaryDir(runsDir), batchDir: string = defaultBatchDir(runsDir)): Promise<GenerateResult> {
  const { envs, batch, counts } = await summarizeRecords(runsDir, microDir, needleDir, faultsDir, loadDir, warmDir, twoHostDir, adversaryDir, batchDir)
  // The report names the folders it read, wherever they are (not always the checkout's results/).
  const from = reportSources({ runs: runsDir, micro: microDir, needle: needleDir, faults: faultsDir, load: loadDir, warm: warmDir, twoHost: twoHostDir, adversary: adversaryDir, batch: batchDir })
  const files = new Map<string, string>([['RESULTS.md', renderMarkdown(envs, from, batch)], ['report.html', renderHtml(envs, from, batch)]])
  for (const env of envs) {
    if (env.sizes.length > 0) {
      const names = chartFiles(env)
      files.set(names.time, timeChart(env))
      files.set(names.stages, stageChart(env))
      if (names.cost !== null) files.set(names.cost, costPerTokenChart(env))
    }
    if (env.needle !== null) files.set(needleHeatmapFile(env), needleHeatmapSvg(env.needle))
  }
  await mkdir(outDir, { recursive: true })
  for (const [name, text] of files) await writeFile(join(outDir, name), text)
  await updateReadmeHeadline(outDir, headlineMarkdown(headlineOf(envs)))
  return { ...counts, environments: envs.length, files: [...files.keys()] }
}

/** Every record under the folders, summarized by environment (what the report is made of), the batched-decode records, and how many of each kind were read. */
export async function summarizeRecords (runsDir: string, microDir: string = defaultMicroDir(runsDir), needleDir: string = defaultNeedleDir(runsDir),
  faultsDir: string = defaultFaultsDir(runsDir), loadDir: string = defaultLoadDir(runsDir), warmDir: string = defaultWarmDir(runsDir),
  twoHostDir: string = defaultTwoHostDir(runsDir), adversaryDir: string = defaultAdversaryDir(runsDir), batchDir: string = defaultBatchDir(runsDir)):
  Promise<{ envs: EnvironmentSummary[], batch: BatchRecord[], counts: Omit<GenerateResult, 'environments' | 'files'> }> {
  const records = await readRunRecords(runsDir)
  const micro = await readMicroRecords(microDir)
  const needle = await readNeedleRecords(needleDir)
  const faults = await readFaultsRecords(faultsDir)
  const load = await readLoadRecords(loadDir)
  const loadLevels = await readLoadLevelsRecords(join(loadDir, 'levels'))
  const warm = await readWarmRecords(warmDir)
  const twoHost = await readTwoHostRecords(twoHostDir)
  const adversary = await readAdversaryRecords(adversaryDir)
  const batch = await readBatchRecords(batchDir)
  const envs = summarize(records, micro, needle, faults, load, warm, twoHost, adversary, loadLevels)
  return {
    envs,
    batch,
    counts: {
      records: records.length, microRecords: micro.length, needleRecords: needle.length, faultsRecords: faults.length, loadRecords: load.length, loadLevelsRecords: loadLevels.length, warmRecords: warm.length,
      twoHostRecords: twoHost.length, adversaryRecords: adversary.length, batchRecords: batch.length,
    },
  }
}

// `pd-bridge results`: records in, RESULTS.md + charts + report.html out.
import { mkdir, writeFile } from 'node:fs/promises'
import { dirname, join, resolve } from 'node:path'
import { stageChart, timeChart } from './charts.ts'
import { readMicroRecords } from './micro-record.ts'
import { readRunRecords } from './record.ts'
import { chartFiles, renderHtml, renderMarkdown } from './render.ts'
import { summarize } from './summary.ts'

/** What the generator wrote. */
export interface GenerateResult {
  records: number
  microRecords: number
  environments: number
  /** Paths written, relative to the output directory. */
  files: string[]
}

/** Where micro-benchmark records live by default: `micro/` next to the run records' directory. */
export function defaultMicroDir (runsDir: string): string {
  return join(dirname(resolve(runsDir)), 'micro')
}

/**
 * Read every run record under `runsDir` and every micro-benchmark record under `microDir`, and
 * regenerate the report files under `outDir`. Charts exist only for environments with runs.
 */
export async function generateResults (runsDir: string, outDir: string, microDir: string = defaultMicroDir(runsDir)): Promise<GenerateResult> {
  const records = await readRunRecords(runsDir)
  const micro = await readMicroRecords(microDir)
  const envs = summarize(records, micro)
  const files = new Map<string, string>([['RESULTS.md', renderMarkdown(envs)], ['report.html', renderHtml(envs)]])
  for (const env of envs) {
    if (env.sizes.length === 0) continue
    const names = chartFiles(env)
    files.set(names.time, timeChart(env))
    files.set(names.stages, stageChart(env))
  }
  await mkdir(outDir, { recursive: true })
  for (const [name, text] of files) await writeFile(join(outDir, name), text)
  return { records: records.length, microRecords: micro.length, environments: envs.length, files: [...files.keys()] }
}

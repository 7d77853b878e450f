// `pd-bridge results`: records in, RESULTS.md + charts + report.html out.
import { mkdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { stageChart, timeChart } from './charts.ts'
import { readRunRecords } from './record.ts'
import { chartFiles, renderHtml, renderMarkdown } from './render.ts'
import { summarize } from './summary.ts'

/** What the generator wrote. */
export interface GenerateResult {
  records: number
  environments: number
  /** Paths written, relative to the output directory. */
  files: string[]
}

/** Read every record under `runsDir` and regenerate the report files under `outDir`. */
export async function generateResults (runsDir: string, outDir: string): Promise<GenerateResult> {
  const records = await readRunRecords(runsDir)
  const envs = summarize(records)
  const files = new Map<string, string>([['RESULTS.md', renderMarkdown(envs)], ['report.html', renderHtml(envs)]])
  for (const env of envs) {
    const names = chartFiles(env)
    files.set(names.time, timeChart(env))
    files.set(names.stages, stageChart(env))
  }
  await mkdir(outDir, { recursive: true })
  for (const [name, text] of files) await writeFile(join(outDir, name), text)
  return { records: records.length, environments: envs.length, files: [...files.keys()] }
}

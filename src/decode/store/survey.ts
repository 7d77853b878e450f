// What a block directory holds, without any expectation: every block's keying metadata (or why it
// cannot be read) and every leftover temporary file. For reports; serving goes through BlockStore.
import { stat } from 'node:fs/promises'
import { BlockStoreError } from './errors.ts'
import { listBlockDir, readBlockHeader, requireDirectory } from './block-file.ts'
import type { BlockInfo } from './metadata.ts'

/** One block file as found. */
export interface SurveyedBlock {
  hash: string
  path: string
  fileSize: number
  info?: BlockInfo
  problem?: string
}

/** A directory's contents. */
export interface Survey {
  blocks: SurveyedBlock[]
  temps: { path: string, pid: number }[]
}

/** Read the header of every block under `root` (no tensor data). */
export async function surveyBlockDir (root: string): Promise<Survey> {
  await requireDirectory(root)
  const survey: Survey = { blocks: [], temps: [] }
  for (const entry of await listBlockDir(root)) {
    if (entry.kind === 'temp') {
      survey.temps.push({ path: entry.path, pid: entry.pid })
      continue
    }
    const fileSize = await stat(entry.path).then((s) => s.size, () => 0)
    try {
      const header = await readBlockHeader(entry.path)
      survey.blocks.push({ hash: entry.hash, path: entry.path, fileSize, info: header.info })
    } catch (e) {
      survey.blocks.push({ hash: entry.hash, path: entry.path, fileSize, problem: e instanceof BlockStoreError ? e.problem : (e as Error).message })
    }
  }
  return survey
}

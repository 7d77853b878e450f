// verify-blocks for the demo: the prompt's own blocks from each store, side by side. The bridged
// store also holds blocks of earlier prompts, so both sides are narrowed to this prompt's chained
// keys (hard links into a fresh folder per side, a copy where links are impossible) and the two
// folders compared with the same function `pd-bridge verify-blocks` runs.
import { copyFile, link, mkdir, stat } from 'node:fs/promises'
import { dirname } from 'node:path'
import { blockKeyChain, blockPath, compareBlockDirs, type VerifyReport } from '../../decode/store/index.ts'

/** The chained block keys of the prompt's full blocks (what the decoder and the bridge both write). */
export function promptBlockKeys (modelName: string, tokens: readonly number[], blockSize: number): string[] {
  return blockKeyChain(modelName, tokens, blockSize)
}

/** Which of `keys` are already in the store at `root` (a warm start would make the demo meaningless). */
export async function presentKeys (root: string, keys: readonly string[]): Promise<string[]> {
  const present: string[] = []
  for (const key of keys) {
    if (await stat(blockPath(root, key)).then(() => true, () => false)) present.push(key)
  }
  return present
}

/** Put the blocks `keys` of store `from` into store layout under `to`; returns the keys that were missing. */
export async function gatherBlocks (from: string, keys: readonly string[], to: string): Promise<string[]> {
  const missing: string[] = []
  for (const key of keys) {
    const src = blockPath(from, key)
    const dst = blockPath(to, key)
    await mkdir(dirname(dst), { recursive: true })
    try {
      await link(src, dst)
    }
    catch (err) {
      const code = (err as NodeJS.ErrnoException).code
      if (code === 'ENOENT') {
        missing.push(key)
        continue
      }
      if (code === 'EEXIST') continue
      await copyFile(src, dst)
    }
  }
  return missing
}

/** What verify-blocks found for the prompt. */
export interface PromptBlocksCheck {
  keys: number
  bridgedDir: string
  nativeDir: string
  missingBridged: string[]
  missingNative: string[]
  report: VerifyReport
}

/** Gather the prompt's blocks from both stores under `workDir` and compare them tensor by tensor. */
export async function verifyPromptBlocks (bridgedStore: string, nativeStore: string, keys: readonly string[], workDir: string): Promise<PromptBlocksCheck> {
  const bridgedDir = `${workDir}/bridged`
  const nativeDir = `${workDir}/native`
  const missingBridged = await gatherBlocks(bridgedStore, keys, bridgedDir)
  const missingNative = await gatherBlocks(nativeStore, keys, nativeDir)
  await mkdir(bridgedDir, { recursive: true })
  await mkdir(nativeDir, { recursive: true })
  const report = await compareBlockDirs(bridgedDir, nativeDir)
  return { keys: keys.length, bridgedDir, nativeDir, missingBridged, missingNative, report }
}

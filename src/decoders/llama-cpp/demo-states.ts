// The llama.cpp demo's state check: the sequence state the bridge wrote for the prompt's bridged
// prefix against the one llama.cpp saved itself at the same boundary while the native leg
// prefilled the same tokens (its write-back stores one at every boundary). Section by section:
// identical fraction and ulp histogram (compare.ts). llama.cpp's arithmetic is not ours (its rope
// angles come from repeated multiplication), so the distance is measured, not required to be zero.
import { readFile, stat } from 'node:fs/promises'
import { blockKeyChain } from '../../decode/store/index.ts'
import { compareStates, parseLlamaCppState, type LlamaCppStateGeometry, type SectionDistance } from '../../engines/llama-cpp/state/index.ts'
import { STATE_SUFFIX } from '../../engines/llama-cpp/store/index.ts'
import { join } from 'node:path'

/** The state file of the boundary whose chain ends in `key`, in a llama.cpp decoder's store. */
export const statePath = (storeDir: string, key: string): string => join(storeDir, key + STATE_SUFFIX)

/** Which of `keys` already have a state file in the store (a warm start would make the demo meaningless). */
export async function presentStates (storeDir: string, keys: readonly string[]): Promise<string[]> {
  const present: string[] = []
  for (const key of keys) if (await stat(statePath(storeDir, key)).then(() => true, () => false)) present.push(key)
  return present
}

/** What the comparison found. */
export interface PromptStatesCheck {
  /** The boundary compared (the bridged tokens), and its key. */
  boundary: number
  key: string
  bridgedFile: string
  nativeFile: string
  /** Which side had no file. */
  missing: Array<'bridged' | 'native'>
  sections: SectionDistance[]
}

/** Compare the two stores' states after the first `boundary` tokens of `tokens`. */
export async function comparePromptStates (bridgedStore: string, nativeStore: string, modelName: string, tokens: readonly number[], blockSize: number, boundary: number,
  g: LlamaCppStateGeometry): Promise<PromptStatesCheck> {
  const keys = blockKeyChain(modelName, tokens.slice(0, boundary), blockSize)
  const key = keys[keys.length - 1] ?? ''
  const bridgedFile = statePath(bridgedStore, key)
  const nativeFile = statePath(nativeStore, key)
  const read = async (f: string) => await readFile(f).then((b) => new Uint8Array(b), () => undefined)
  const [a, b] = await Promise.all([read(bridgedFile), read(nativeFile)])
  const missing: PromptStatesCheck['missing'] = []
  if (a === undefined) missing.push('bridged')
  if (b === undefined) missing.push('native')
  const sections = a !== undefined && b !== undefined && keys.length > 0
    ? compareStates(parseLlamaCppState(a, bridgedFile), parseLlamaCppState(b, nativeFile), g)
    : []
  return { boundary, key, bridgedFile, nativeFile, missing, sections }
}

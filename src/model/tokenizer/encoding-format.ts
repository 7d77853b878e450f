// DeepSeek's own encodings, picked from the checkpoint as vLLM picks them: by config.json's
// `architectures`, for a checkpoint whose tokenizer_config.json has no chat_template.
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { ConfigError } from '../../errors.ts'
import type { ChatRenderer } from './chat-format.ts'
import { DEEPSEEK_V32_ARCHITECTURE, DeepseekV32Format } from './deepseek-v32-format.ts'
import { DEEPSEEK_V4_ARCHITECTURE, DeepseekV4Format } from './deepseek-v4-format.ts'

/** Each architecture with an encoding, and that encoding. */
const ENCODINGS: ReadonlyArray<[string, () => ChatRenderer]> = [
  [DEEPSEEK_V4_ARCHITECTURE, () => new DeepseekV4Format()],
  [DEEPSEEK_V32_ARCHITECTURE, () => new DeepseekV32Format()],
]

/**
 * The encoding `<dir>/config.json`'s architecture ships with (DeepSeek-V4's or V3.2's); undefined for
 * any other. Called only for a checkpoint whose tokenizer_config.json has no chat_template.
 */
export async function loadEncodingFormat (dir: string): Promise<ChatRenderer | undefined> {
  const file = join(dir, 'config.json')
  let text: string
  try {
    text = await readFile(file, 'utf8')
  } catch (e) {
    // No config.json beside the tokenizer (a tokenizer-only directory): no encoding to pick.
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw new ConfigError('config.json', `cannot read: ${(e as Error).message}`, file)
  }
  let config: unknown
  try {
    config = JSON.parse(text)
  } catch (e) {
    throw new ConfigError('(root)', `not valid JSON: ${(e as Error).message}`, file)
  }
  const archs = (config as { architectures?: unknown }).architectures
  if (!Array.isArray(archs)) return undefined
  return ENCODINGS.find(([arch]) => archs.includes(arch))?.[1]()
}

// One digest for "these two ends were configured alike" (tokenizer.json, chat template).
import { createHash } from 'node:crypto'

/** sha256 (hex) of a text. */
export function digestOf (text: string): string {
  return createHash('sha256').update(text).digest('hex')
}

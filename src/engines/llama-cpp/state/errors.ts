// The one error a llama.cpp sequence-state file raises here: which section, what is wrong, and
// (when known) which file. Raised before llama.cpp reads anything, since a foreign state can
// crash the process inside llama.cpp.
import { PdBridgeError } from '../../../errors.ts'

export class LlamaCppStateError extends PdBridgeError {
  override name = 'LlamaCppStateError'
  constructor (readonly section: string, readonly problem: string, readonly file?: string) {
    super(`${file !== undefined ? file + ': ' : ''}llama.cpp sequence state, ${section}: ${problem}`)
  }
}

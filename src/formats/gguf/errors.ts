// One error for everything wrong with a GGUF file or with what is asked to be written into one.
import { PdBridgeError } from '../../errors.ts'

/** A GGUF file (or a value to write) that breaks the format's rules; the message names the key, tensor or byte offset. */
export class GgufError extends PdBridgeError {
  override name = 'GgufError'
}

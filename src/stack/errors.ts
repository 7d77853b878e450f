// The stack's error: a process that would not start, a state directory that is unusable, a
// deployment link that is down. A PdBridgeError, so the CLI prints its sentence and exits 2.
import { PdBridgeError } from '../errors.ts'

/** A failure of the embedded stack or its supervisor; `process` names the child at fault, if any. */
export class StackError extends PdBridgeError {
  override name = 'StackError'
  constructor (message: string, readonly process?: string) {
    super(message)
  }
}

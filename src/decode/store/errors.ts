// The block store's error: every message names the block (hash or file) and the problem.
import { PdBridgeError } from '../../errors.ts'

/** A block, block directory or payload that breaks the store's rules. */
export class BlockStoreError extends PdBridgeError {
  override name = 'BlockStoreError'
  constructor (readonly block: string, readonly problem: string) {
    super(`${block}: ${problem}`)
  }
}

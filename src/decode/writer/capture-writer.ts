// The one shape the bridge drives a writer through, whichever decoder it writes for: open (checks
// done), writeNext until null (the deadline is checked between steps), finalize (everything written
// and verified: the report), close on failure. BlockWriter (oMLX blocks) has it as it is;
// LlamaCppStateWriter (llama.cpp sequence states) implements it.
import type { CaptureManifest } from '../../wire/manifest.ts'
import type { BlockWriterReport } from './writer.ts'

export interface CaptureWriter {
  /** One more step written (a block, a staged block, a state); null when nothing is left. */
  writeNext: () => Promise<unknown>
  /** Drain, verify, report: `blocks` full blocks covered, `bytes` written, timings read/build/write/verify. */
  finalize: () => Promise<BlockWriterReport>
  /** Give up: release the capture files (what is already written stays, each complete). */
  close: () => Promise<void>
  /** The capture's validated manifest. */
  readonly manifest: CaptureManifest
}

// Emptying the session's one sequence between requests, so nothing of one request leaks into the next.
import type { LlamaCppSession } from '../runner.ts'

/** Remove every token (and its cache cells) from the sequence; afterwards it holds 0 tokens. */
export async function clearSequence (session: LlamaCppSession): Promise<void> {
  await session.clear()
}

// Keep a supervised stack up until the user stops it (SIGINT, SIGTERM) or a child dies, then stop
// it. A second signal while stopping kills every child at once.
import type { Supervisor } from './supervisor.ts'

/** Why the stack went down. */
export type StopReason = { kind: 'signal', signal: NodeJS.Signals } | { kind: 'died', message: string }

/**
 * Resolve once the stack is down: after SIGINT/SIGTERM (reason `signal`) or after a child died
 * (reason `died`, with the message naming it). `stop` stops everything; it runs exactly once.
 */
export async function runUntilStopped (supervisor: Supervisor, stop: () => Promise<void>, onStopping?: (reason: StopReason) => void): Promise<StopReason> {
  return await new Promise<StopReason>((resolve) => {
    let stopping = false
    const finish = (reason: StopReason): void => {
      if (stopping) return
      stopping = true
      process.off('SIGINT', onSignal)
      process.off('SIGTERM', onSignal)
      // A second Ctrl-C means "now": no more grace periods.
      const now = (): void => {
        supervisor.killAllNow()
        process.exit(1)
      }
      process.once('SIGINT', now)
      process.once('SIGTERM', now)
      onStopping?.(reason)
      void stop().finally(() => {
        process.off('SIGINT', now)
        process.off('SIGTERM', now)
        resolve(reason)
      })
    }
    const onSignal = (signal: NodeJS.Signals): void => finish({ kind: 'signal', signal })
    process.on('SIGINT', onSignal)
    process.on('SIGTERM', onSignal)
    supervisor.onDeath((_child, message) => finish({ kind: 'died', message }))
  })
}

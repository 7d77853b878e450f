// The embedded prefill engine: `pd-bridge prefill-engine` (docs/prefill-engine.md).
import { openCaptureBackend } from './capture-backend.ts'
import type { PrefillEngineOptions } from './options.ts'
import { createPrefillEngine, type PrefillEngineServer } from './server.ts'

export { createPrefillEngine, type CaptureBackend, type OpenCaptureBackend, type PrefillEngineServer } from './server.ts'
export { openCaptureBackend } from './capture-backend.ts'
export type { PrefillEngineOptions } from './options.ts'
export { ApiError, type ApiErrorType } from './api-error.ts'
export { parsePrefillRequest, type PrefillRequest, type RequestLimits, type PromptSource } from './request.ts'
export { PrefillQueue, type JobRunner, type QueueOptions } from './queue.ts'
export { makeCaptureRunner, type CaptureSink, type StartCapture, type RunnerDeps } from './runner.ts'
export { acquireRootLock, isLiveEngine, LOCK_FILE, type RootLock, type LockRecord } from './root-lock.ts'
export { failOrphanedCaptures, type RecoveryReport } from './recover.ts'
export type { PrefillJob, JobState } from './job.ts'

/** Start the prefill engine with the real capture hook (src/capture) on the sidecar given. */
export function startPrefillEngine (options: PrefillEngineOptions): Promise<PrefillEngineServer> {
  return createPrefillEngine(options, openCaptureBackend)
}

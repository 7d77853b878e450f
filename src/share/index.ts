// The capture share: server, streaming client, and their errors.
export { startShareServer, type ShareServer, type ShareServerOptions, type ShareLogger } from './server.ts'
export { streamCapture, type StreamCaptureOptions, type StreamCaptureResult } from './client.ts'
export { downloadLayer, type ShareClientEvent, type LayerDownload, type DownloadedLayer } from './download.ts'
export { routeTarget, MAX_TARGET_LENGTH, type ShareRoute } from './route.ts'
export { decideRange, type RangeDecision } from './range.ts'
export { etagFromStat, ifNoneMatchHits, ifRangeAllows } from './conditional.ts'
export { DEFAULT_RETRY, backoffDelay, isTransientStatus, type RetryPolicy } from './backoff.ts'
export { ChecksumError, ShareHttpError, ShareDeadlineError, ShareStallError, CaptureFailedError, ShareAbortedError } from './errors.ts'

// Which file, if any, a raw request target names. Judged on the raw bytes Node hands over (it does
// no normalisation): first by the route guard every port shares (src/http/route-guard.ts), then by
// the share's stricter rule (no `%` and no dot segment at all: no file name needs them), before any
// decoding, so no spelling of a traversal can reach the file system.
import { normalizeTarget } from '../http/route-guard.ts'
import { LAYER_FILE_PATTERN, MANIFEST_FILE, isValidRequestId } from '../wire/manifest.ts'
import { SEGMENT_FILE_PATTERN, SEGMENT_INDEX_FILE } from '../wire/segment-file.ts'

/** What a request target asks for, or why it is refused. */
export type ShareRoute =
  | { kind: 'health' }
  | { kind: 'file', requestId: string, file: string }
  | { kind: 'refused', status: 400 | 404 | 414, reason: string }

/** Longer targets than this are not a capture path; refuse them before looking further. */
export const MAX_TARGET_LENGTH = 1024

/**
 * Route a raw request target (`req.url`). Only `/health` and `/captures/<requestId>/<file>` exist,
 * with `<file>` `manifest.json`, `layer-<iii>.safetensors`, or a running capture's block segments
 * (`segments.json`, `segment-<kkkkkk>.safetensors`). Refused with 400: anything not
 * starting with `/` (absolute-form URLs, `*`), any `%` (names never need escaping, and `%2e%2e`,
 * `%2f`, `%5c`, `%00` are the encoded traversals), backslashes, control bytes, empty segments (`//`,
 * trailing `/`), `.` or `..` anywhere in a segment, ids or file names outside their patterns.
 * A query string is ignored. Other well-formed paths are 404.
 */
export function routeTarget (rawTarget: string): ShareRoute {
  const refuse = (reason: string): ShareRoute => ({ kind: 'refused', status: 400, reason })
  if (rawTarget.length > MAX_TARGET_LENGTH) return { kind: 'refused', status: 414, reason: `request target longer than ${MAX_TARGET_LENGTH} characters` }
  const shared = normalizeTarget(rawTarget)
  if (!shared.ok) return { kind: 'refused', status: shared.status === 414 ? 414 : 400, reason: shared.reason }
  const query = rawTarget.indexOf('?')
  const path = query === -1 ? rawTarget : rawTarget.slice(0, query)
  if (path.includes('%')) return refuse('percent-encoded bytes are refused (no valid name needs them; %2e, %2f, %5c, %00 spell traversals)')
  if (path.includes('\\')) return refuse('backslashes are refused (a path separator on some systems)')
  if (/[\u0000-\u001f\u007f]/.test(path)) return refuse('control characters are refused')
  const segments = path.slice(1).split('/')
  if (segments.some((s) => s === '')) return refuse('empty path segment (// or a trailing /)')
  if (segments.some((s) => s.includes('..') || s === '.')) return refuse('dot segments (. and ..) are refused')
  if (segments.length === 1 && segments[0] === 'health') return { kind: 'health' }
  if (segments.length !== 3 || segments[0] !== 'captures') return { kind: 'refused', status: 404, reason: 'no such route (GET /captures/<requestId>/<file> or /health)' }
  const [, requestId, file] = segments
  if (!isValidRequestId(requestId)) return refuse(`request id ${JSON.stringify(requestId)} is outside [A-Za-z0-9][A-Za-z0-9._-]{0,127}`)
  if (file !== MANIFEST_FILE && file !== SEGMENT_INDEX_FILE && !LAYER_FILE_PATTERN.test(file) && !SEGMENT_FILE_PATTERN.test(file)) {
    return refuse(`file ${JSON.stringify(file)} is none of manifest.json, segments.json, layer-<iii>.safetensors, segment-<kkkkkk>.safetensors`)
  }
  return { kind: 'file', requestId, file }
}

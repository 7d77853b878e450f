// One byte range per request, as RFC 9110 section 14 defines `Range: bytes=...`, with a strict
// reading of anything odd: the client is ours, so an odd header is a bug to surface, not to guess at.

/** What to send for a request's Range header against a representation of `size` bytes. */
export type RangeDecision =
  | { kind: 'full' }
  | { kind: 'partial', start: number, end: number }
  | { kind: 'unsatisfiable', reason: string }

// 15 digits stay below 2^53, so every accepted number is exact.
const MAX_DIGITS = 15

/**
 * Decide the response to a Range header. No header, or a unit other than `bytes` (RFC 9110 14.2:
 * an unknown unit is ignored) -> full. `bytes=a-b`, `bytes=a-`, `bytes=-n` -> partial, with the end
 * clamped to size-1 as the RFC requires. Unsatisfiable (answered 416): a malformed spec, start > end,
 * start >= size, a suffix of 0, numbers over 15 digits, any empty file, and more than one range
 * (a deliberate choice: the client never asks for several, and multipart/byteranges would be
 * code that exists only to be attacked).
 */
export function decideRange (header: string | undefined, size: number): RangeDecision {
  if (header === undefined) return { kind: 'full' }
  const eq = header.indexOf('=')
  if (eq === -1) return unsatisfiable('malformed Range header (expected bytes=start-end)')
  const unit = header.slice(0, eq).trim().toLowerCase()
  if (unit !== 'bytes') return { kind: 'full' }
  const spec = header.slice(eq + 1).trim()
  if (spec.includes(',')) return unsatisfiable('multiple ranges are not served; ask for one range per request')
  const m = /^(\d*)-(\d*)$/.exec(spec)
  if (m === null || (m[1] === '' && m[2] === '')) return unsatisfiable(`malformed range ${JSON.stringify(spec)}`)
  if (m[1].length > MAX_DIGITS || m[2].length > MAX_DIGITS) return unsatisfiable(`range number longer than ${MAX_DIGITS} digits`)
  if (size === 0) return unsatisfiable('the file is empty; no range can be satisfied')
  if (m[1] === '') {
    const suffix = Number(m[2])
    if (suffix === 0) return unsatisfiable('a suffix range of 0 bytes selects nothing')
    return { kind: 'partial', start: Math.max(0, size - suffix), end: size - 1 }
  }
  const start = Number(m[1])
  if (start >= size) return unsatisfiable(`range starts at ${start}, the file has ${size} bytes`)
  if (m[2] === '') return { kind: 'partial', start, end: size - 1 }
  const end = Number(m[2])
  if (start > end) return unsatisfiable(`range start ${start} is after its end ${end}`)
  return { kind: 'partial', start, end: Math.min(end, size - 1) }
}

function unsatisfiable (reason: string): RangeDecision {
  return { kind: 'unsatisfiable', reason }
}

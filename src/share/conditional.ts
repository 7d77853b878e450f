// Entity tags and the two conditional headers the share honours (RFC 9110 sections 8.8.3, 13.1.2, 13.1.5).
import type { BigIntStats } from 'node:fs'

/**
 * A strong ETag from what identifies the bytes on disk: inode, size, and modification time in
 * nanoseconds. Captures are replaced by rename (new inode), so any rewrite changes the tag; the
 * manifest's SHA-256 is not used because it is a claim about the file, which the client verifies.
 */
export function etagFromStat (st: BigIntStats): string {
  return `"${st.ino.toString(16)}-${st.size.toString(16)}-${st.mtimeNs.toString(16)}"`
}

function listedTags (header: string): string[] {
  return header.match(/(?:W\/)?"[^"]*"/g) ?? []
}

/** If-None-Match uses the weak comparison: `*` or any listed tag equal to ours, ignoring `W/`. */
export function ifNoneMatchHits (header: string | undefined, etag: string): boolean {
  if (header === undefined) return false
  if (header.trim() === '*') return true
  return listedTags(header).some((tag) => tag.replace(/^W\//, '') === etag)
}

/**
 * If-Range uses the strong comparison: the Range is honoured only when the header is exactly our
 * strong tag. A weak tag or an HTTP-date never matches (the full file is sent), which is always safe.
 */
export function ifRangeAllows (header: string | undefined, etag: string): boolean {
  if (header === undefined) return true
  return header.trim() === etag
}

// One rule for every HTTP port here (docs/front-door.md, "Which routes each port serves"): a request
// target is normalized once, by RFC 3986 (percent-decoding, dot-segment removal), spellings that
// different parsers read differently are refused with 400, and only then is the normalized path
// matched against the port's explicit allowlist (404 off the list, 405 for another method). What a
// server routes and forwards is the normalized spelling, never the raw one, so the route judged is
// the route served.

/** Longer targets than this are refused with 414 before they are looked at. */
export const MAX_TARGET_LENGTH = 4096

/** A target that survived normalization: `path` is the canonical spelling, `segments` its decoded segments. */
export interface NormalTarget {
  ok: true
  /** `/` + the segments, each percent-encoded canonically (upper-case hex, only what must be). */
  path: string
  segments: string[]
  /** The raw query after `?` ('' when none); it never takes part in routing. */
  query: string
}

/** Why a target was refused. */
export interface RefusedTarget {
  ok: false
  status: 400 | 404 | 405 | 414
  reason: string
  /** With 405: the methods the path is served under. */
  allow?: string[]
}

// RFC 3986 pchar plus '/' and '%': anything else raw in a path (backslash, space, controls,
// non-ASCII, quotes, brackets) is a spelling some parser will read its own way.
const RAW_PATH_CHAR = /^[A-Za-z0-9\-._~!$&'()*+,;=:@/%]$/
// What stays unescaped in a canonical segment: unreserved, sub-delims, ':' and '@'.
const CANONICAL_CHAR = /^[A-Za-z0-9\-._~!$&'()*+,;=:@]$/

function refuse (reason: string, status: 400 | 414 = 400): RefusedTarget {
  return { ok: false, status, reason }
}

function describeChar (c: string): string {
  const code = c.codePointAt(0) ?? 0
  return code >= 0x21 && code < 0x7f ? `'${c}'` : `U+${code.toString(16).toUpperCase().padStart(4, '0')}`
}

/** Percent-decode one raw segment to its text, or say why it is refused. */
function decodeSegment (raw: string): string | RefusedTarget {
  const bytes: number[] = []
  for (let i = 0; i < raw.length; i++) {
    if (raw[i] !== '%') {
      bytes.push(raw.charCodeAt(i))
      continue
    }
    const hex = raw.slice(i + 1, i + 3)
    if (!/^[0-9A-Fa-f]{2}$/.test(hex)) return refuse(`a '%' not followed by two hex digits (${JSON.stringify(raw.slice(i, i + 3))})`)
    const b = parseInt(hex, 16)
    if (b === 0x2f || b === 0x5c) return refuse(`an encoded slash (%${hex}) is refused: some parsers read it as a separator, some do not`)
    if (b === 0x00) return refuse('an encoded NUL (%00) is refused')
    if (b < 0x20 || b === 0x7f) return refuse(`an encoded control character (%${hex}) is refused`)
    if (b === 0x25) return refuse('an encoded percent sign (%25) is refused: a second decoding would read another path')
    bytes.push(b)
    i += 2
  }
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(Uint8Array.from(bytes))
  }
  catch {
    return refuse('percent-encoded bytes that are not UTF-8')
  }
}

/** A segment as the canonical path spells it. */
export function encodeSegment (segment: string): string {
  let out = ''
  for (const c of segment) {
    if (CANONICAL_CHAR.test(c)) out += c
    else for (const b of Buffer.from(c, 'utf8')) out += '%' + b.toString(16).toUpperCase().padStart(2, '0')
  }
  return out
}

/**
 * Normalize a raw request target (`req.url`, exactly as received). Refused with 400: a target not
 * starting with `/` (absolute-form, `*`), a raw character outside RFC 3986's path characters
 * (backslashes, controls, spaces, non-ASCII), bad or encoded `%`, encoded slashes or backslashes,
 * encoded NUL or controls, bytes that are not UTF-8, empty segments (`//`, a trailing `/`), and `..`
 * above the root. `.` and `..` segments (also as `%2e`) are removed as RFC 3986 5.2.4 says; a path
 * that then ends in `/` is refused like any trailing slash.
 */
export function normalizeTarget (raw: string): NormalTarget | RefusedTarget {
  if (raw.length > MAX_TARGET_LENGTH) return refuse(`request target longer than ${MAX_TARGET_LENGTH} characters`, 414)
  if (!raw.startsWith('/')) return refuse('the request target must be a path starting with / (absolute URLs and * are refused)')
  const q = raw.indexOf('?')
  const rawPath = q === -1 ? raw : raw.slice(0, q)
  const query = q === -1 ? '' : raw.slice(q + 1)
  for (const c of rawPath) {
    if (c === '\\') return refuse('a backslash is refused: some parsers read it as a path separator')
    if (!RAW_PATH_CHAR.test(c)) return refuse(`the character ${describeChar(c)} is not allowed raw in a path`)
  }
  if (rawPath === '/') return { ok: true, path: '/', segments: [], query }
  const segments: string[] = []
  const raws = rawPath.slice(1).split('/')
  for (let i = 0; i < raws.length; i++) {
    if (raws[i] === '') return refuse('an empty path segment (// or a trailing /) is refused')
    const segment = decodeSegment(raws[i])
    if (typeof segment !== 'string') return segment
    if (segment === '.' || segment === '..') {
      if (segment === '..' && segments.pop() === undefined) return refuse('a .. segment that climbs above the root is refused')
      // RFC 3986 5.2.4: a dot segment at the end leaves a trailing slash.
      if (i === raws.length - 1) return refuse('a path ending in a dot segment ends in a slash once normalized, and trailing slashes are refused')
      continue
    }
    segments.push(segment)
  }
  if (segments.length === 0) return refuse('a path made only of dot segments is refused')
  return { ok: true, path: '/' + segments.map(encodeSegment).join('/'), segments, query }
}

/** One route a port serves: its methods and a path pattern whose `:name` segments match any one segment. */
export interface AllowedRoute {
  methods: readonly string[]
  path: string
}

/** A request the allowlist lets through: the route, the normalized target and the named segments. */
export interface AllowedTarget extends NormalTarget {
  route: AllowedRoute
  params: Record<string, string>
  /** The canonical path and the query, as a server routes and forwards it. */
  url: string
}

function matchPattern (pattern: string, segments: readonly string[]): Record<string, string> | undefined {
  const parts = pattern === '/' ? [] : pattern.slice(1).split('/')
  if (parts.length !== segments.length) return undefined
  const params: Record<string, string> = {}
  for (let i = 0; i < parts.length; i++) {
    if (parts[i].startsWith(':')) params[parts[i].slice(1)] = segments[i]
    else if (parts[i] !== segments[i]) return undefined
  }
  return params
}

/** A port's explicit list of routes, and the one judgement every request gets before any work. */
export class RouteAllowlist {
  constructor (readonly routes: readonly AllowedRoute[]) {}

  /** Judge a raw target: 400/414 for a refused spelling, 404 off the list, 405 for another method. */
  judge (method: string, rawTarget: string): AllowedTarget | RefusedTarget {
    const target = normalizeTarget(rawTarget)
    if (!target.ok) return target
    const allow: string[] = []
    for (const route of this.routes) {
      const params = matchPattern(route.path, target.segments)
      if (params === undefined) continue
      if (route.methods.includes(method)) {
        return { ...target, route, params, url: target.query === '' && !rawTarget.includes('?') ? target.path : `${target.path}?${target.query}` }
      }
      allow.push(...route.methods)
    }
    if (allow.length > 0) {
      const methods = [...new Set(allow)]
      return { ok: false, status: 405, reason: `${method} is not allowed on ${target.path}; allowed: ${methods.join(', ')}`, allow: methods }
    }
    return { ok: false, status: 404, reason: `no route ${method} ${target.path}` }
  }
}

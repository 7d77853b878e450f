// Headers a proxy must not pass on (RFC 9110 7.6.1: they describe one connection, not the message),
// and the one helper that copies the rest. Each caller names what it drops besides, and why.

/** Connection-scoped headers, never forwarded. */
export const HOP_BY_HOP: ReadonlySet<string> = new Set(['connection', 'keep-alive', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding', 'upgrade'])

/** The headers of `from` minus hop-by-hop ones and `alsoDrop` (lower case), list values joined with ", ". */
export function passHeaders (from: Record<string, string | string[] | undefined>, alsoDrop: readonly string[] = []): Record<string, string> {
  const drop = new Set(alsoDrop)
  const out: Record<string, string> = {}
  for (const [k, v] of Object.entries(from)) {
    if (v === undefined || HOP_BY_HOP.has(k) || drop.has(k)) continue
    out[k] = Array.isArray(v) ? v.join(', ') : v
  }
  return out
}

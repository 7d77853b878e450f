// A child is ready when it prints its ready line on stdout. The servers print one JSON object
// with `event: "ready"` and `url`; the share prints its bare URL. Both are accepted.

/** What a ready line said: the URL to reach the process, and any other fields it printed. */
export interface ReadyInfo {
  url: string
  fields: Record<string, unknown>
}

const HTTP_URL = /^https?:\/\/[^\s/]+$/

/** The ready info in `line`, or undefined when the line is not a ready line. */
export function parseReadyLine (line: string): ReadyInfo | undefined {
  const text = line.trim()
  if (HTTP_URL.test(text)) return { url: text, fields: {} }
  if (!text.startsWith('{')) return undefined
  let v: unknown
  try {
    v = JSON.parse(text)
  }
  catch {
    return undefined
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return undefined
  const o = v as Record<string, unknown>
  if (o.event !== 'ready' || typeof o.url !== 'string' || !HTTP_URL.test(o.url)) return undefined
  return { url: o.url, fields: o }
}

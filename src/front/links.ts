// Checking each link the front door depends on: the decoder, the prefill engine and the share
// answer /health within the link deadline. What they say about themselves (the decoder's model,
// block size and geometry; the engine's sidecar fingerprint) is kept for the geometry checks.
import { acceptsConnections, callJson, isNoAnswer, joinUrl, LinkError } from './http.ts'

/** One link's state, as /health shows it. */
export interface LinkState {
  ok: boolean
  url: string
  /** Round trip in ms. */
  ms: number
  error?: string
  /** It did not answer within the deadline but accepts connections: there and busy, not down. */
  busy?: boolean
  /** The link's /health body when it answered 200 with JSON. */
  health?: Record<string, unknown>
}

function isRecord (v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

/** GET `<url>/health` of `link`: ok on a 200 (with the body kept when it is a JSON object). */
export async function checkLink (link: string, url: string, timeoutMs: number, headers: Record<string, string> = {}): Promise<LinkState> {
  const t0 = performance.now()
  try {
    const a = await callJson(link, joinUrl(url, '/health'), { timeoutMs, headers })
    const ms = Math.round(performance.now() - t0)
    if (a.status !== 200) return { ok: false, url, ms, error: `${link} /health answered ${a.status}` }
    return { ok: true, url, ms, ...(isRecord(a.body) ? { health: a.body } : {}) }
  } catch (e) {
    const error = e instanceof LinkError ? e.message : String(e)
    // A slow answer is not a missing process: only a refused (or unroutable) connection is down.
    if (isNoAnswer(e) && await acceptsConnections(url, timeoutMs)) {
      return { ok: false, busy: true, url, ms: Math.round(performance.now() - t0), error: `${error}; it accepts connections, so it is busy, not down` }
    }
    return { ok: false, url, ms: Math.round(performance.now() - t0), error }
  }
}

/** What the decoder says about itself in /health (fields our embedded decoder reports; others may not). */
export interface DecoderFacts {
  model?: string
  profile?: string
  blockSize?: number
  geometryFingerprint?: string
  /** limits.max_positions (else max_position_embeddings) and limits.max_tokens (the embedded decoder's completion limits). */
  maxPositions?: number
  maxTokens?: number
  /** limits.max_body_bytes: the largest body the decoder reads. */
  maxBodyBytes?: number
  /** Digests of the decoder's tokenizer.json and chat format (front/prompt-agreement.ts). */
  tokenizerDigest?: string
  chatTemplateDigest?: string
}

/** Read the decoder's facts from its /health body. */
export function decoderFacts (health: Record<string, unknown> | undefined): DecoderFacts {
  if (health === undefined) return {}
  const cache = isRecord(health.cache) ? health.cache : undefined
  const limits = isRecord(health.limits) ? health.limits : undefined
  return {
    model: typeof health.model === 'string' ? health.model : undefined,
    profile: typeof health.profile === 'string' ? health.profile : undefined,
    blockSize: typeof cache?.block_size === 'number' ? cache.block_size : undefined,
    geometryFingerprint: typeof health.geometry_fingerprint === 'string' ? health.geometry_fingerprint : undefined,
    maxPositions: typeof limits?.max_positions === 'number' ? limits.max_positions : typeof health.max_position_embeddings === 'number' ? health.max_position_embeddings : undefined,
    maxTokens: typeof limits?.max_tokens === 'number' ? limits.max_tokens : undefined,
    maxBodyBytes: typeof limits?.max_body_bytes === 'number' ? limits.max_body_bytes : undefined,
    tokenizerDigest: typeof health.tokenizer_digest === 'string' ? health.tokenizer_digest : undefined,
    chatTemplateDigest: typeof health.chat_template_digest === 'string' ? health.chat_template_digest : undefined,
  }
}

/** The model ids the decoder lists in /v1/models (empty when it lists none or cannot be asked). */
export async function decoderModelIds (url: string, timeoutMs: number, headers: Record<string, string> = {}): Promise<string[]> {
  return (await decoderModels(url, timeoutMs, headers)).ids
}

/** The decoder's /v1/models: the ids, and whether it is our embedded decoder (every model owned_by pd-bridge). */
export async function decoderModels (url: string, timeoutMs: number, headers: Record<string, string> = {}): Promise<{ ids: string[], embedded: boolean }> {
  const a = await callJson('decoder', joinUrl(url, '/v1/models'), { timeoutMs, headers })
  if (a.status !== 200 || !isRecord(a.body) || !Array.isArray(a.body.data)) return { ids: [], embedded: false }
  const models = a.body.data.filter(isRecord)
  return {
    ids: models.flatMap((m) => typeof m.id === 'string' ? [m.id] : []),
    embedded: models.length > 0 && models.every((m) => m.owned_by === 'pd-bridge'),
  }
}

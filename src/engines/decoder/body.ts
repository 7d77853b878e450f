// A completion request's body, from bytes to a checked generation request, with the decoder's own
// refusals. The decoder's server reads every body through here, and the front door in front of it
// runs the same functions before any work, so the two refuse exactly the same bodies with the same
// status and error (one reader, never a copy).
import { ApiError, badRequest } from './api-error.ts'
import { parseChatRequest, parseCompletionRequest, type GenerationRequest } from './request.ts'

/** A JSON media type (`application/json`, `application/*+json`, with parameters), or none given. */
export function isJsonType (type: string | undefined): boolean {
  return type === undefined || /^application\/([a-z0-9.+-]+\+)?json\s*(;|$)/i.test(type)
}

/** The 413 for a body over `maxBodyBytes` (the decoder's `--max-body-bytes`). */
export function bodyTooLarge (maxBodyBytes: number): ApiError {
  return new ApiError(413, 'request_too_large_error', `the request body is larger than this server accepts (--max-body-bytes ${maxBodyBytes})`, null, 'request_too_large')
}

/** The 415 for a body that is not JSON. */
export function notJson (): ApiError {
  return new ApiError(415, 'unsupported_media_type_error', 'the request body must be JSON (Content-Type: application/json)', null, 'unsupported_media_type')
}

/** The 404 for a model other than the served one. */
export function unknownModel (asked: string, served: string): ApiError {
  return new ApiError(404, 'invalid_request_error', `the model '${asked}' does not exist; this decoder serves '${served}'`, 'model', 'model_not_found')
}

/** What to do with `__proto__` keys and `constructor.prototype` (keys that poison a merge into a plain object). */
export type PoisonKeys = 'refuse' | 'keep'

function member (at: string, key: string): string {
  return at === '' ? key : `${at}.${key}`
}

/** The first `__proto__` key or `constructor.prototype` in `value`, as a path; undefined when none. */
function poisonKeyIn (value: unknown): string | undefined {
  // Iterative: a deeply nested body must not overflow the stack.
  const todo: Array<{ v: unknown, at: string }> = [{ v: value, at: '' }]
  while (todo.length > 0) {
    const { v, at } = todo.pop() as { v: unknown, at: string }
    if (typeof v !== 'object' || v === null) continue
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) if (typeof v[i] === 'object' && v[i] !== null) todo.push({ v: v[i], at: `${at}[${i}]` })
      continue
    }
    if (Object.hasOwn(v, '__proto__')) return member(at, '__proto__')
    const ctor = (v as Record<string, unknown>).constructor
    if (Object.hasOwn(v, 'constructor') && typeof ctor === 'object' && ctor !== null && Object.hasOwn(ctor, 'prototype')) return member(at, 'constructor.prototype')
    for (const [k, child] of Object.entries(v)) if (typeof child === 'object' && child !== null) todo.push({ v: child, at: member(at, k) })
  }
  return undefined
}

/**
 * The JSON value of a request body: 415 for another media type, 400 `invalid_json` for an empty
 * body, text that is not JSON and (with `poison: 'refuse'`, the decoder's rule) a `__proto__` key
 * or `constructor.prototype` anywhere in it.
 */
export function readJsonBody (contentType: string | undefined, raw: Buffer | undefined, poison: PoisonKeys = 'refuse'): unknown {
  if (!isJsonType(contentType)) throw notJson()
  if (raw === undefined || raw.length === 0) throw badRequest('the request body is empty; send a JSON object', null, 'invalid_json')
  let value: unknown
  try {
    value = JSON.parse(raw.toString('utf8'))
  } catch (e) {
    throw badRequest(`the request body is not valid JSON: ${(e as Error).message}`, null, 'invalid_json')
  }
  if (poison === 'refuse') {
    const at = poisonKeyIn(value)
    if (at !== undefined) throw badRequest(`the request body holds '${at}', a key this server refuses (it would poison an object's prototype)`, null, 'invalid_json')
  }
  return value
}

/** A JSON body of `endpoint` checked by the decoder's rules (request.ts). */
export function readGenerationRequest (endpoint: 'chat' | 'completion', body: unknown): GenerationRequest {
  return endpoint === 'chat' ? parseChatRequest(body) : parseCompletionRequest(body)
}

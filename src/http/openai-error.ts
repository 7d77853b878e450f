// The one error shape every OpenAI-compatible surface here answers with (the decoder, the front door):
// { error: { message, type, param, code } }, as OpenAI and the openai client expect it.
import { PdBridgeError } from '../errors.ts'
import type { RefusedTarget } from './route-guard.ts'

/** Error types, as OpenAI names them (openai-node maps them by status). */
export type OpenAiErrorType =
  | 'invalid_request_error'
  | 'not_found_error'
  | 'request_too_large_error'
  | 'unsupported_media_type_error'
  | 'rate_limit_error'
  | 'service_unavailable_error'
  | 'bad_gateway_error'
  | 'gateway_timeout_error'
  | 'server_error'

/** The JSON body of an error response (param and code are null when not known). */
export interface OpenAiErrorBody {
  error: { message: string, type: OpenAiErrorType, param: string | null, code: string | null }
}

/** A refusal answered with `status`, an OpenAI error body and extra headers (Retry-After); `param` names the field. */
export class OpenAiApiError extends PdBridgeError {
  override name = 'OpenAiApiError'
  constructor (
    readonly status: number,
    readonly type: OpenAiErrorType,
    message: string,
    readonly param: string | null = null,
    readonly code: string | null = null,
    readonly headers: Record<string, string> = {},
  ) {
    super(message)
  }

  /** The JSON body of the response. */
  toBody (): OpenAiErrorBody {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } }
  }
}

/** 400: the request is malformed or asks for something the server cannot do; `param` names the field. */
export function badRequest (message: string, param: string | null = null, code: string | null = null): OpenAiApiError {
  return new OpenAiApiError(400, 'invalid_request_error', message, param, code)
}

/** Map anything thrown while serving to an API error: ours as they are, anything else a 500 saying what broke. */
export function toOpenAiApiError (err: unknown, what = 'internal error'): OpenAiApiError {
  if (err instanceof OpenAiApiError) return err
  return new OpenAiApiError(500, 'server_error', `${what}: ${err instanceof Error ? err.message : String(err)}`)
}

/** A target the route guard refused, in this shape: 404 `unknown_route`, 405 with Allow, 400/414 `invalid_path`. */
export function routeRefusal (refusal: RefusedTarget): OpenAiApiError {
  if (refusal.status === 404) return new OpenAiApiError(404, 'not_found_error', refusal.reason, null, 'unknown_route')
  if (refusal.status === 405) return new OpenAiApiError(405, 'invalid_request_error', refusal.reason, null, 'method_not_allowed', { allow: (refusal.allow ?? []).join(', ') })
  return new OpenAiApiError(refusal.status, 'invalid_request_error', refusal.reason, null, 'invalid_path')
}

/** The same refusal with its message passed through `redact` (src/http/redact.ts). */
export function redactedError (err: OpenAiApiError, redact: (text: string) => string): OpenAiApiError {
  return new OpenAiApiError(err.status, err.type, redact(err.message), err.param, err.code, err.headers)
}

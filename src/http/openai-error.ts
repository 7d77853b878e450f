// The one error shape every OpenAI-compatible surface here answers with (the decoder, the front door):
// { error: { message, type, param, code } }, as OpenAI and the openai client expect it.
import { PdBridgeError } from '../errors.ts'

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

// The one error shape the decoder's OpenAI-compatible API answers with:
// { error: { message, type, param, code } }, as OpenAI and the openai client expect it.
import { PdBridgeError } from '../../errors.ts'

/** Error types, as OpenAI names them (and openai-node maps by status). */
export type ApiErrorType =
  | 'invalid_request_error'
  | 'not_found_error'
  | 'request_too_large_error'
  | 'unsupported_media_type_error'
  | 'rate_limit_error'
  | 'service_unavailable_error'
  | 'server_error'

/** The JSON body of an error response (OpenAI's shape: param and code are null when not known). */
export interface ApiErrorBody {
  error: { message: string, type: ApiErrorType, param: string | null, code: string | null }
}

/** A refusal the API reports with `status` and an OpenAI error body; `param` names the request field. */
export class ApiError extends PdBridgeError {
  override name = 'ApiError'
  constructor (
    readonly status: number,
    readonly type: ApiErrorType,
    message: string,
    readonly param: string | null = null,
    readonly code: string | null = null,
    readonly headers: Record<string, string> = {},
  ) {
    super(message)
  }

  /** The JSON body of the response. */
  toBody (): ApiErrorBody {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } }
  }
}

/** 400: the request is malformed or asks for something the decoder cannot do; `param` names the field. */
export function badRequest (message: string, param: string | null = null, code: string | null = null): ApiError {
  return new ApiError(400, 'invalid_request_error', message, param, code)
}

/** Map anything thrown while serving to an ApiError: ours as they are, anything else a 500 that says what broke. */
export function toApiError (err: unknown): ApiError {
  if (err instanceof ApiError) return err
  const message = err instanceof Error ? err.message : String(err)
  return new ApiError(500, 'server_error', `internal error: ${message}`)
}

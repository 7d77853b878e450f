// The one error shape the prefill engine's HTTP API answers with: a status, an OpenAI-style type,
// a message that names the problem, and the offending request field when there is one.
import { PdBridgeError } from '../../errors.ts'

/** Error types, as OpenAI-compatible servers (vLLM among them) name them. */
export type ApiErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'not_found_error'
  | 'method_not_allowed_error'
  | 'conflict_error'
  | 'request_too_large_error'
  | 'unsupported_media_type_error'
  | 'rate_limit_error'
  | 'service_unavailable_error'
  | 'internal_error'

/** A refusal the API reports as `{ error: { message, type, param? } }` with `status`. */
export class ApiError extends PdBridgeError {
  override name = 'ApiError'
  constructor (
    readonly status: number,
    readonly type: ApiErrorType,
    message: string,
    readonly param?: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message)
  }

  /** The JSON body of the response. */
  toBody (): { error: { message: string, type: ApiErrorType, param?: string } } {
    return { error: { message: this.message, type: this.type, ...(this.param === undefined ? {} : { param: this.param }) } }
  }
}

/** 400: the request is malformed or asks for something the engine cannot do; `param` names the field. */
export function badRequest (message: string, param?: string): ApiError {
  return new ApiError(400, 'invalid_request_error', message, param)
}

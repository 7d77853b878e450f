// The front door's own refusals, in OpenAI's error shape ({ error: { message, type, param, code } }),
// so the openai client maps them to its typed errors exactly as it does the decoder's.
import { PdBridgeError } from '../errors.ts'

/** OpenAI error types the front door answers with. */
export type FrontErrorType =
  | 'invalid_request_error'
  | 'not_found_error'
  | 'request_too_large_error'
  | 'unsupported_media_type_error'
  | 'rate_limit_error'
  | 'service_unavailable_error'
  | 'bad_gateway_error'
  | 'gateway_timeout_error'
  | 'server_error'

/** The JSON body of an error response. */
export interface FrontErrorBody {
  error: { message: string, type: FrontErrorType, param: string | null, code: string | null }
}

/** A refusal with its status, OpenAI body and extra headers (Retry-After). */
export class FrontApiError extends PdBridgeError {
  override name = 'FrontApiError'
  constructor (
    readonly status: number,
    readonly type: FrontErrorType,
    message: string,
    readonly param: string | null = null,
    readonly code: string | null = null,
    readonly headers: Record<string, string> = {},
  ) {
    super(message)
  }

  /** The JSON body. */
  toBody (): FrontErrorBody {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } }
  }
}

/** 400 naming the field. */
export function invalidRequest (message: string, param: string | null = null, code: string | null = null): FrontApiError {
  return new FrontApiError(400, 'invalid_request_error', message, param, code)
}

/** Anything thrown while serving, as an API error: ours as they are, anything else a 500 that says what broke. */
export function toFrontApiError (err: unknown): FrontApiError {
  if (err instanceof FrontApiError) return err
  return new FrontApiError(500, 'server_error', `front door internal error: ${err instanceof Error ? err.message : String(err)}`)
}

// The front door's own refusals, in the same OpenAI error shape as the decoder's
// (src/http/openai-error.ts), so the openai client maps both to its typed errors alike.
import { OpenAiApiError, toOpenAiApiError } from '../http/openai-error.ts'

export {
  OpenAiApiError as FrontApiError,
  badRequest as invalidRequest,
  type OpenAiErrorBody as FrontErrorBody,
  type OpenAiErrorType as FrontErrorType,
} from '../http/openai-error.ts'

/** Anything thrown while serving, as an API error: ours as they are, anything else a 500 that says what broke. */
export function toFrontApiError (err: unknown): OpenAiApiError {
  return toOpenAiApiError(err, 'front door internal error')
}

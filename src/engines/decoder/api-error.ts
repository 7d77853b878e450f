// The decoder's API errors: the shared OpenAI error shape (src/http/openai-error.ts) under the names
// the decoder's modules use.
export {
  OpenAiApiError as ApiError,
  badRequest,
  toOpenAiApiError as toApiError,
  type OpenAiErrorBody as ApiErrorBody,
  type OpenAiErrorType as ApiErrorType,
} from '../../http/openai-error.ts'

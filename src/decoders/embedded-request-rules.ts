// The request rules of the decoder server in src/engines/decoder (the embedded decoder's HTTP layer,
// which the llama.cpp decoder runs too): its body reader, request parser and prompt checks.
import { bodyTooLarge, readGenerationRequest, readJsonBody, unknownModel } from '../engines/decoder/body.ts'
import { checkTokenIds, completionBudget } from '../engines/decoder/prompt.ts'
import type { RequestRules } from './request-rules.ts'

/** The embedded decoder server's rules. */
export const EMBEDDED_SERVER_RULES: RequestRules = {
  readBody: (contentType, raw, poison) => readJsonBody(contentType, raw, poison),
  check: (endpoint, body) => {
    const request = readGenerationRequest(endpoint, body)
    return {
      ...(request.model !== undefined ? { model: request.model } : {}),
      checkBudget: (promptTokens, limits) => { completionBudget(promptTokens, request, limits) },
    }
  },
  checkTokenIds,
  bodyTooLarge,
  unknownModel,
}

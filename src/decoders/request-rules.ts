// A decoder kind's request rules: the checks its server runs on a completion body, run by the front
// door before any bridge work (decoder.requestRules), so a request the decoder would refuse after a
// bridge is refused at once, in the decoder's own words. The front door gets them from the kind's
// record, never from the decoder's modules.

/** The decoder's limits a request is checked against (its /health reports them). */
export interface RequestLimits {
  maxTokens: number
  maxPositions: number
}

/** A request the decoder's rules accepted. */
export interface CheckedRequest {
  /** The model it names, if any. */
  model?: string
  /** The decoder's context check for a prompt of `promptTokens` tokens: throws the error it would answer. */
  checkBudget: (promptTokens: number, limits: RequestLimits) => void
}

/** How a body's prototype-poisoning keys are treated: refused (the decoder's rule) or kept (forwarded as sent). */
export type PoisonKeyRule = 'refuse' | 'keep'

/** The rules; each throws the error the decoder itself would answer (status, type, code, message). */
export interface RequestRules {
  /** The body's JSON value as the decoder reads it (media type, empty body, not JSON, poison keys under 'refuse'). */
  readBody: (contentType: string | undefined, raw: Buffer | undefined, poison: PoisonKeyRule) => unknown
  /** The body of a chat (`chat`) or text (`completion`) request, checked by the decoder's rules. */
  check: (endpoint: 'chat' | 'completion', body: unknown) => CheckedRequest
  /** Prompt token ids given as ids, checked against the vocabulary. */
  checkTokenIds: (tokens: readonly number[], vocabSize: number) => void
  /** The error for a body over the decoder's limit, and for a model it does not serve. */
  bodyTooLarge: (maxBodyBytes: number) => Error
  unknownModel: (asked: string, served: string) => Error
}

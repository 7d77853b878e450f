// From a checked request to prompt token ids and a completion budget, refusing (400) anything the
// model cannot hold; this runs before a request is queued, so a refusal never waits.
import { PdBridgeError } from '../../errors.ts'
import { badRequest } from './api-error.ts'
import type { DecoderModel } from './model.ts'
import type { GenerationRequest, PromptInput } from './request.ts'

/**
 * Token ids of a prompt: chat messages through the checkpoint's chat template (with the
 * request's chat_template_kwargs), text encoded with the tokenizer's special tokens (bos first, as
 * add_special_tokens does), token ids as given (each must be below vocab_size).
 */
export function promptTokens (model: Pick<DecoderModel, 'tokenizer' | 'config'>, prompt: PromptInput): number[] {
  if (prompt.kind === 'chat') {
    try {
      return model.tokenizer.encodeChat(prompt.messages, prompt.chat)
    } catch (e) {
      // The chat format refuses these messages (a template's raise_exception, a shape the encoding has no place for).
      if (e instanceof PdBridgeError) throw badRequest(e.message, 'messages')
      throw e
    }
  }
  if (prompt.kind === 'text') return model.tokenizer.encode(prompt.text, { addSpecialTokens: true })
  checkTokenIds(prompt.tokens, model.config.vocabSize)
  return prompt.tokens
}

/** A 400 naming the first token id at or above `vocabSize`. */
export function checkTokenIds (tokens: readonly number[], vocabSize: number): void {
  tokens.forEach((t, i) => {
    if (t >= vocabSize) throw badRequest(`'prompt[${i}]' is ${t}, not a token id below vocab_size (${vocabSize})`, 'prompt')
  })
}

/** Server-side limits a request is checked against. */
export interface TokenLimits {
  /** The most completion tokens a request may ask for; also the default (capped by the context left). */
  maxTokens: number
  /** max_position_embeddings: prompt + completion must fit. */
  maxPositions: number
}

/** The number of tokens to generate at most, or a 400 naming both numbers that do not fit. */
export function completionBudget (promptLength: number, request: Pick<GenerationRequest, 'endpoint' | 'maxTokens' | 'maxTokensParam'>, limits: TokenLimits): number {
  const param = request.maxTokensParam
  const room = limits.maxPositions - promptLength
  if (room < 1) {
    throw badRequest(`the prompt has ${promptLength} tokens, and max_position_embeddings is ${limits.maxPositions}: no room is left for a completion`, request.endpoint === 'chat' ? 'messages' : 'prompt', 'context_length_exceeded')
  }
  const asked = request.maxTokens
  if (asked === undefined) return Math.min(limits.maxTokens, room)
  if (asked > room) {
    throw badRequest(`the prompt (${promptLength} tokens) + ${param} (${asked}) = ${promptLength + asked} tokens, more than max_position_embeddings (${limits.maxPositions})`, param, 'context_length_exceeded')
  }
  if (asked > limits.maxTokens) {
    throw badRequest(`'${param}' is ${asked}, more than this server allows (--max-tokens ${limits.maxTokens})`, param)
  }
  return asked
}

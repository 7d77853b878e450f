// Prompt tokens and the completion budget: the chat template, specials, vocab bounds, and 400s that
// name both numbers.
import { describe, expect, it } from 'vitest'
import { ApiError, completionBudget, eosIds, promptTokens, type DecoderModel } from '../../src/engines/decoder/index.ts'
import { renderChat } from '../../src/model/tokenizer/index.ts'
import { tinyTokenizer } from './helpers.ts'

const tokenizer = tinyTokenizer()
// promptTokens reads only the tokenizer and vocab_size.
const model = { tokenizer, config: { vocabSize: 512 } } as unknown as DecoderModel
const limits = { maxTokens: 100, maxPositions: 1000 }

function refused (f: () => unknown): ApiError {
  try {
    f()
  } catch (e) {
    if (e instanceof ApiError) return e
    throw e
  }
  throw new Error('accepted')
}

describe('promptTokens', () => {
  it('renders chat with the template and a generation prompt, encodes text with bos, keeps ids as given', () => {
    const messages = [{ role: 'system' as const, content: 'S' }, { role: 'user' as const, content: 'hello' }]
    const chat = promptTokens(model, { kind: 'chat', messages })
    expect(chat).toEqual(tokenizer.encode(renderChat(messages, true)))
    expect(tokenizer.decode(chat)).toBe('<｜begin▁of▁sentence｜>S<｜User｜>hello<｜Assistant｜>')
    expect(promptTokens(model, { kind: 'text', text: 'hello' })).toEqual([0, ...tokenizer.encode('hello')])
    expect(promptTokens(model, { kind: 'tokens', tokens: [7, 511] })).toEqual([7, 511])
  })

  it('refuses a token id at or above vocab_size, naming it', () => {
    const e = refused(() => promptTokens(model, { kind: 'tokens', tokens: [1, 512] }))
    expect([e.status, e.param]).toEqual([400, 'prompt'])
    expect(e.message).toBe("'prompt[1]' is 512, not a token id below vocab_size (512)")
  })
})

describe('completionBudget', () => {
  const chat = { endpoint: 'chat' as const, maxTokensParam: 'max_tokens' as const }
  it('defaults to --max-tokens, capped by the context left', () => {
    expect(completionBudget(10, { ...chat, maxTokens: undefined }, limits)).toBe(100)
    expect(completionBudget(950, { ...chat, maxTokens: undefined }, limits)).toBe(50)
    expect(completionBudget(10, { ...chat, maxTokens: 100 }, limits)).toBe(100)
    expect(completionBudget(900, { ...chat, maxTokens: 100 }, limits)).toBe(100)
  })

  it('prompt + max_tokens over max_position_embeddings is a 400 naming every number', () => {
    const e = refused(() => completionBudget(901, { ...chat, maxTokens: 100 }, limits))
    expect([e.status, e.param, e.code]).toEqual([400, 'max_tokens', 'context_length_exceeded'])
    expect(e.message).toBe('the prompt (901 tokens) + max_tokens (100) = 1001 tokens, more than max_position_embeddings (1000)')
  })

  it('more than --max-tokens is a 400 naming both', () => {
    const e = refused(() => completionBudget(1, { endpoint: 'chat', maxTokensParam: 'max_completion_tokens', maxTokens: 101 }, limits))
    expect([e.status, e.param]).toEqual([400, 'max_completion_tokens'])
    expect(e.message).toBe("'max_completion_tokens' is 101, more than this server allows (--max-tokens 100)")
  })

  it('a prompt that fills the context leaves no room, whatever was asked', () => {
    const e = refused(() => completionBudget(1000, { endpoint: 'completion', maxTokensParam: 'max_tokens', maxTokens: undefined }, limits))
    expect([e.param, e.code]).toEqual(['prompt', 'context_length_exceeded'])
    expect(e.message).toMatch(/1000 tokens, and max_position_embeddings is 1000/)
  })
})

describe('eosIds', () => {
  it('reads eos_token_id as one id, a list, or none', () => {
    expect([...eosIds(1)]).toEqual([1])
    expect([...eosIds([1, 7])]).toEqual([1, 7])
    expect([...eosIds(null)]).toEqual([])
  })
})

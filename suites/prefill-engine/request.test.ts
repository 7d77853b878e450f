// POST /v1/prefill bodies: every refusal names its field, and the three prompt forms resolve to
// the tokens a serving engine would run (bos + text; the chat template with the generation prompt).
import { beforeAll, describe, expect, it } from 'vitest'
import { loadTokenizer, renderChat, type Tokenizer } from '../../src/model/tokenizer/index.ts'
import { ApiError } from '../../src/engines/prefill/api-error.ts'
import { parsePrefillRequest, type RequestLimits } from '../../src/engines/prefill/request.ts'
import { tinyCheckpoint } from './helpers.ts'

let tokenizer: Tokenizer
let limits: RequestLimits
beforeAll(async () => {
  tokenizer = await loadTokenizer(await tinyCheckpoint())
  limits = { vocabSize: 512, maxTokens: 100, maxPositionEmbeddings: 1000, tokenizer }
})

function refusal (body: unknown, l: RequestLimits = limits): { status: number, type: string, param?: string, message: string } {
  try {
    parsePrefillRequest(body, l)
  }
  catch (e) {
    if (!(e instanceof ApiError)) throw e
    return { status: e.status, type: e.type, param: e.param, message: e.message }
  }
  throw new Error(`accepted ${JSON.stringify(body)}`)
}

describe('parsePrefillRequest resolves the three prompt forms', () => {
  it('takes tokens as given', () => {
    const r = parsePrefillRequest({ tokens: [0, 5, 511], request_id: 'a-1', memory_budget_bytes: 4096 }, limits)
    expect([...r.tokens]).toEqual([0, 5, 511])
    expect(r).toMatchObject({ requestId: 'a-1', source: 'tokens', memoryBudgetBytes: 4096 })
  })

  it('encodes a prompt with bos, as add_special_tokens=True', () => {
    const r = parsePrefillRequest({ prompt: 'The harbour town' }, limits)
    const plain = tokenizer.encode('The harbour town')
    expect([...r.tokens]).toEqual([0, ...plain])
    expect(r.requestId).toBeUndefined()
  })

  it('renders messages through the chat template with the generation prompt', () => {
    const messages = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello' }] as const
    const r = parsePrefillRequest({ messages }, limits)
    expect([...r.tokens]).toEqual(tokenizer.encode(renderChat(messages, true)))
    expect(r.tokens.at(-1)).toBe(tokenizer.encode('<｜Assistant｜>')[0])
    expect(r.source).toBe('messages')
  })
})

describe('parsePrefillRequest refuses bad bodies with a 400 naming the field', () => {
  const cases: Array<[string, unknown, string | undefined, string]> = [
    ['not an object', [1, 2], undefined, 'must be a JSON object, got an array'],
    ['null body', null, undefined, 'got null'],
    ['unknown field', { tokens: [1], temperature: 0 }, 'temperature', 'unknown field "temperature"'],
    ['stream_blocks not a boolean', { tokens: [1], stream_blocks: 1 }, 'stream_blocks', 'stream_blocks must be true or false, got'],
    ['no prompt', { request_id: 'x' }, undefined, 'give exactly one of tokens, prompt or messages'],
    ['two prompts', { tokens: [1], prompt: 'hi' }, 'prompt', 'not tokens and prompt'],
    ['tokens not an array', { tokens: '1 2 3' }, 'tokens', 'tokens must be an array'],
    ['empty tokens', { tokens: [] }, 'tokens', 'tokens is empty'],
    ['token out of vocab', { tokens: [1, 2, 512] }, 'tokens[2]', 'tokens[2] is number 512, not a token id in [0, 512)'],
    ['negative token', { tokens: [-1] }, 'tokens[0]', 'not a token id'],
    ['fractional token', { tokens: [1.5] }, 'tokens[0]', 'number 1.5'],
    ['string token', { tokens: ['7'] }, 'tokens[0]', 'the string "7"'],
    ['too many tokens', { tokens: new Array(101).fill(1) }, 'tokens', '101 tokens, more than this engine\'s --max-tokens (100)'],
    ['empty prompt', { prompt: '' }, 'prompt', 'prompt is empty'],
    ['prompt not a string', { prompt: 42 }, 'prompt', 'prompt must be a string, got number 42'],
    ['prompt too long', { prompt: 'word '.repeat(200) }, 'prompt', 'more than this engine\'s --max-tokens (100)'],
    ['messages not an array', { messages: { role: 'user' } }, 'messages', 'messages must be an array'],
    ['empty messages', { messages: [] }, 'messages', 'messages is empty'],
    ['bad role', { messages: [{ role: 'tool', content: 'x' }] }, 'messages[0].role', 'must be one of system, user, assistant'],
    ['content not a string', { messages: [{ role: 'user', content: ['x'] }] }, 'messages[0].content', 'content must be a string, got an array'],
    ['extra message field', { messages: [{ role: 'user', content: 'x', name: 'bob' }] }, 'messages[0].name', 'unknown field "name"'],
    ['bad request id', { tokens: [1], request_id: '../etc' }, 'request_id', 'must be a string matching'],
    ['request id with ..', { tokens: [1], request_id: 'a..b' }, 'request_id', "without '..'"],
    ['request id not a string', { tokens: [1], request_id: 7 }, 'request_id', 'number 7'],
    ['zero budget', { tokens: [1], memory_budget_bytes: 0 }, 'memory_budget_bytes', 'must be a positive integer'],
    ['string budget', { tokens: [1], memory_budget_bytes: '1GB' }, 'memory_budget_bytes', 'must be a positive integer'],
  ]
  it.each(cases)('%s', (_name, body, param, fragment) => {
    const r = refusal(body)
    expect(r.status).toBe(400)
    expect(r.type).toBe('invalid_request_error')
    expect(r.param).toBe(param)
    expect(r.message).toContain(fragment)
  })

  it('names max_position_embeddings when it is the tighter limit', () => {
    const r = refusal({ tokens: new Array(11).fill(1) }, { ...limits, maxTokens: 11, maxPositionEmbeddings: 10 })
    expect(r.message).toContain("11 tokens, more than the model's max_position_embeddings (10)")
  })

  it('refuses text without a tokenizer and says to send tokens', () => {
    const r = refusal({ prompt: 'hi' }, { ...limits, tokenizer: undefined })
    expect(r.message).toContain('no tokenizer.json')
    expect(r.param).toBe('prompt')
    expect([...parsePrefillRequest({ tokens: [3] }, { ...limits, tokenizer: undefined }).tokens]).toEqual([3])
  })
})

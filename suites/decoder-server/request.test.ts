// Reading chat and completion bodies: what is accepted, and every refusal naming its field.
import { describe, expect, it } from 'vitest'
import { ApiError, parseChatRequest, parseCompletionRequest } from '../../src/engines/decoder/index.ts'

const user = [{ role: 'user', content: 'hi' }]

function refusal (parse: (b: unknown) => unknown, body: unknown): ApiError {
  try {
    parse(body)
  } catch (e) {
    if (e instanceof ApiError) return e
    throw e
  }
  throw new Error(`accepted: ${JSON.stringify(body)}`)
}

describe('chat bodies that are accepted', () => {
  it('reads messages, roles (developer kept: a Jinja template renders it as system), text parts, limits, stop and stream options', () => {
    const r = parseChatRequest({
      model: 'm',
      messages: [
        { role: 'developer', content: 'be brief' },
        { role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] },
        { role: 'assistant', content: 'c', name: 'x' },
        { role: 'user', content: 'd' },
      ],
      max_tokens: 7,
      max_completion_tokens: 5,
      stop: 'X',
      stream: true,
      stream_options: { include_usage: true },
      temperature: 0,
      top_p: 0.5,
      n: 1,
      seed: 3,
      presence_penalty: 0,
      logit_bias: {},
      ignore_eos: true,
      return_token_ids: true,
      chat_template_kwargs: { thinking: true },
      some_unknown_field: 1,
    })
    expect(r).toEqual({
      endpoint: 'chat',
      model: 'm',
      prompt: { kind: 'chat', messages: [{ role: 'developer', content: 'be brief' }, { role: 'user', content: 'a\nb' }, { role: 'assistant', content: 'c', name: 'x' }, { role: 'user', content: 'd' }], chat: { kwargs: { thinking: true } } },
      maxTokens: 5,
      maxTokensParam: 'max_completion_tokens',
      stop: ['X'],
      stream: true,
      includeUsage: true,
      ignoreEos: true,
      returnTokenIds: true,
      sampling: { temperature: 0, topP: 0.5, topK: 0, minP: 0, presencePenalty: 0, frequencyPenalty: 0, seed: 3, logprobs: false, topLogprobs: 0, n: 1 },
    })
  })

  it('reads every sampling field: temperature, top_p, top_k, min_p, penalties, seed, logprobs, top_logprobs, n', () => {
    expect(parseChatRequest({
      messages: user, temperature: 0.7, top_p: 0.9, top_k: 40, min_p: 0.05, presence_penalty: -1.5, frequency_penalty: 2, seed: -12, logprobs: true, top_logprobs: 20, n: 8,
    }).sampling).toEqual({ temperature: 0.7, topP: 0.9, topK: 40, minP: 0.05, presencePenalty: -1.5, frequencyPenalty: 2, seed: -12, logprobs: true, topLogprobs: 20, n: 8 })
    // vLLM's -1 is no top_k cut, as 0 is; absent temperature is greedy.
    expect(parseChatRequest({ messages: user, top_k: -1 }).sampling).toMatchObject({ temperature: 0, topK: 0, logprobs: false, topLogprobs: 0, n: 1, seed: undefined })
    expect(parseCompletionRequest({ prompt: 'a', logprobs: 3 }).sampling).toMatchObject({ logprobs: true, topLogprobs: 3 })
    expect(parseCompletionRequest({ prompt: 'a', logprobs: 0 }).sampling).toMatchObject({ logprobs: true, topLogprobs: 0 })
    expect(parseCompletionRequest({ prompt: 'a', logprobs: null }).sampling).toMatchObject({ logprobs: false, topLogprobs: 0 })
  })

  it('reads tools, tool calls, tool results, reasoning in history and reasoning_effort (vLLM\'s fields)', () => {
    const tools = [{ type: 'function', function: { name: 'get_weather', description: 'now', parameters: { type: 'object', properties: {} } } }]
    const call = { id: 'c1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }
    const r = parseChatRequest({
      messages: [
        { role: 'user', content: 'weather?' },
        { role: 'assistant', content: null, reasoning_content: 'use the tool', tool_calls: [call] },
        { role: 'tool', tool_call_id: 'c1', content: [{ type: 'text', text: 'sunny' }] },
        { role: 'assistant', content: 'Sunny.', reasoning: 'vLLM calls it reasoning' },
      ],
      tools,
      tool_choice: 'auto',
      reasoning_effort: 'max',
      chat_template_kwargs: { thinking: true },
    })
    expect(r.prompt).toEqual({
      kind: 'chat',
      messages: [
        { role: 'user', content: 'weather?' },
        { role: 'assistant', reasoning_content: 'use the tool', tool_calls: [call] },
        { role: 'tool', tool_call_id: 'c1', content: 'sunny' },
        { role: 'assistant', content: 'Sunny.', reasoning_content: 'vLLM calls it reasoning' },
      ],
      chat: { kwargs: { thinking: true, reasoning_effort: 'max' }, tools },
    })
    // chat_template_kwargs' own reasoning_effort wins; an empty tools list is no tools.
    expect(parseChatRequest({ messages: user, tools: [], reasoning_effort: 'high', chat_template_kwargs: { reasoning_effort: 'max' } }).prompt)
      .toMatchObject({ chat: { kwargs: { reasoning_effort: 'max' } } })
    expect((parseChatRequest({ messages: user, tools: [] }).prompt as { chat: object }).chat).toEqual({})
    // Tools may be streamed: the stream splits the reply as the whole answer does (reply-stream.ts).
    expect(parseChatRequest({ messages: user, stream: true, tools })).toMatchObject({ stream: true, prompt: { chat: { tools } } })
  })

  it('defaults: no model, no limit, no stop, not streamed; null counts as absent', () => {
    expect(parseChatRequest({ messages: user, max_tokens: null, stop: null, temperature: null })).toMatchObject({
      model: undefined, maxTokens: undefined, maxTokensParam: 'max_tokens', stop: [], stream: false, includeUsage: false, ignoreEos: false, returnTokenIds: false,
    })
  })
})

describe('completion bodies that are accepted', () => {
  it('takes a string, a one-string batch, token ids and a one-list batch', () => {
    expect(parseCompletionRequest({ prompt: 'abc' }).prompt).toEqual({ kind: 'text', text: 'abc' })
    expect(parseCompletionRequest({ prompt: '' }).prompt).toEqual({ kind: 'text', text: '' })
    expect(parseCompletionRequest({ prompt: ['abc'] }).prompt).toEqual({ kind: 'text', text: 'abc' })
    expect(parseCompletionRequest({ prompt: [5, 6] }).prompt).toEqual({ kind: 'tokens', tokens: [5, 6] })
    expect(parseCompletionRequest({ prompt: [[5, 6]] }).prompt).toEqual({ kind: 'tokens', tokens: [5, 6] })
  })

  it('ignores max_completion_tokens (a chat field) and reads max_tokens', () => {
    expect(parseCompletionRequest({ prompt: 'a', max_tokens: 3, max_completion_tokens: 9 })).toMatchObject({ maxTokens: 3, maxTokensParam: 'max_tokens' })
  })
})

describe('refusals name the field and the problem', () => {
  const chat: Array<[string, unknown, string | null, RegExp, string | null]> = [
    ['a body that is not an object', [1], null, /must be a JSON object, got an array/, null],
    ['missing messages', {}, 'messages', /'messages' is required/, null],
    ['messages not an array', { messages: 'hi' }, 'messages', /must be an array, got a string/, null],
    ['no messages', { messages: [] }, 'messages', /empty/, null],
    ['a message that is not an object', { messages: [3] }, 'messages[0]', /must be an object/, null],
    ['a function role', { messages: [{ role: 'function', content: 'x' }] }, 'messages[0].role', /'function'.*system, developer, user, assistant and tool/, 'unsupported_value'],
    ['a tool message without tool_call_id', { messages: [{ role: 'tool', content: 'x' }] }, 'messages[0].tool_call_id', /'messages\[0\]\.tool_call_id' is required: a string/, null],
    ['a role that is not a string', { messages: [{ role: 1, content: 'x' }] }, 'messages[0].role', /must be a string, got a number/, null],
    ['missing content', { messages: [{ role: 'user' }] }, 'messages[0].content', /required/, null],
    ['an image part', { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: {} }] }] }, 'messages[0].content', /'image_url' part; only text parts are rendered/, 'unsupported_value'],
    ['a tool call without a function', { messages: [{ role: 'assistant', content: '', tool_calls: [{}] }] }, 'messages[0].tool_calls[0].function', /must be an object \{name, arguments\}/, null],
    ['tool call arguments that are not a string', { messages: [{ role: 'assistant', tool_calls: [{ id: 'a', type: 'function', function: { name: 'f', arguments: {} } }] }] }, 'messages[0].tool_calls[0].function.arguments', /must be a string, got an object/, null],
    ['tool calls on a user message', { messages: [{ role: 'user', content: 'x', tool_calls: [] }] }, 'messages[0].tool_calls', /only for assistant messages/, null],
    ['max_tokens of the wrong type', { messages: user, max_tokens: 'ten' }, 'max_tokens', /must be an integer, got a string/, null],
    ['max_tokens 0', { messages: user, max_tokens: 0 }, 'max_tokens', /at least 1, got 0/, null],
    ['fractional max_completion_tokens', { messages: user, max_completion_tokens: 2.5 }, 'max_completion_tokens', /integer, got 2.5/, null],
    ['n = 9', { messages: user, n: 9 }, 'n', /'n' must be an integer between 1 and 8, got 9/, null],
    ['n = 0', { messages: user, n: 0 }, 'n', /between 1 and 8, got 0/, null],
    ['a temperature out of range', { messages: user, temperature: 3 }, 'temperature', /between 0 and 2/, null],
    ['a negative temperature', { messages: user, temperature: -0.1 }, 'temperature', /between 0 and 2, got -0.1/, null],
    ['a temperature that is a string', { messages: user, temperature: '1' }, 'temperature', /must be a number, got a string/, null],
    ['a top_p of 0', { messages: user, top_p: 0 }, 'top_p', /\(0, 1\]/, null],
    ['a top_k below -1', { messages: user, top_k: -2 }, 'top_k', /integer between -1 and/, null],
    ['a fractional top_k', { messages: user, top_k: 2.5 }, 'top_k', /integer, got 2.5/, null],
    ['a min_p above 1', { messages: user, min_p: 1.5 }, 'min_p', /between 0 and 1/, null],
    ['a penalty out of range', { messages: user, frequency_penalty: 2.5 }, 'frequency_penalty', /between -2 and 2, got 2.5/, null],
    ['a presence penalty out of range', { messages: user, presence_penalty: -3 }, 'presence_penalty', /between -2 and 2, got -3/, null],
    ['a fractional seed', { messages: user, seed: 1.5 }, 'seed', /integer, got 1.5/, null],
    ['logprobs not a boolean', { messages: user, logprobs: 2 }, 'logprobs', /boolean, got a number/, null],
    ['top_logprobs without logprobs', { messages: user, top_logprobs: 2 }, 'top_logprobs', /needs 'logprobs' set to true/, null],
    ['top_logprobs over 20', { messages: user, logprobs: true, top_logprobs: 21 }, 'top_logprobs', /between 0 and 20, got 21/, null],
    ['a logit bias', { messages: user, logit_bias: { 5: 10 } }, 'logit_bias', /not supported/, 'unsupported_value'],
    ['a tool without a function', { messages: user, tools: [{ type: 'function' }] }, 'tools[0].function', /must be an object/, null],
    ['a tool of another type', { messages: user, tools: [{ type: 'web_search' }] }, 'tools[0].type', /only "function" tools/, 'unsupported_value'],
    ['tools not an array', { messages: user, tools: {} }, 'tools', /must be an array/, null],
    ['a forced tool choice', { messages: user, tool_choice: 'required' }, 'tool_choice', /constrained decoding/, 'unsupported_value'],
    ['reasoning_effort not a string', { messages: user, reasoning_effort: 3 }, 'reasoning_effort', /must be a string/, null],
    ['a JSON response format', { messages: user, response_format: { type: 'json_object' } }, 'response_format', /not supported/, 'unsupported_value'],
    ['stream not a boolean', { messages: user, stream: 'yes' }, 'stream', /boolean, got a string/, null],
    ['stream_options without stream', { messages: user, stream_options: { include_usage: true } }, 'stream_options', /only allowed when 'stream' is true/, null],
    ['include_usage not a boolean', { messages: user, stream: true, stream_options: { include_usage: 1 } }, 'stream_options.include_usage', /boolean/, null],
    ['five stop strings', { messages: user, stop: ['a', 'b', 'c', 'd', 'e'] }, 'stop', /5 sequences; at most 4/, null],
    ['an empty stop string', { messages: user, stop: ['a', ''] }, 'stop', /'stop\[1\]' is empty/, null],
    ['a stop that is a number', { messages: user, stop: 5 }, 'stop', /string or an array of strings, got a number/, null],
    ['a model that is not a string', { messages: user, model: 5 }, 'model', /must be a string/, null],
  ]
  it.each(chat)('chat: %s', (_what, body, param, message, code) => {
    const e = refusal(parseChatRequest, body)
    expect([e.status, e.type, e.param, e.code]).toEqual([400, 'invalid_request_error', param, code])
    expect(e.message).toMatch(message)
  })

  const completion: Array<[string, unknown, string | null, RegExp]> = [
    ['missing prompt', { max_tokens: 3 }, 'prompt', /'prompt' is required/],
    ['a prompt that is a number', { prompt: 5 }, 'prompt', /string or an array of token ids, got a number/],
    ['two prompts', { prompt: ['a', 'b'] }, 'prompt', /holds 2 prompts/],
    ['an empty id list', { prompt: [[]] }, 'prompt', /'prompt\[0\]' is empty/],
    ['a negative id', { prompt: [1, -2] }, 'prompt', /'prompt\[1\]' must be a token id.*-2/],
    ['a fractional id', { prompt: [1.5] }, 'prompt', /'prompt\[0\]'.*1\.5/],
    ['echo', { prompt: 'a', echo: true }, 'echo', /not supported/],
    ['suffix', { prompt: 'a', suffix: 'z' }, 'suffix', /not supported/],
    ['best_of 2', { prompt: 'a', best_of: 2 }, 'best_of', /must be 1/],
    ['logprobs over 5', { prompt: 'a', logprobs: 6 }, 'logprobs', /between 0 and 5, got 6/],
    ['logprobs as a boolean', { prompt: 'a', logprobs: true }, 'logprobs', /integer, got a boolean/],
    ['top_logprobs (a chat field)', { prompt: 'a', logprobs: 2, top_logprobs: 2 }, 'top_logprobs', /chat completions field/],
  ]
  it.each(completion)('completion: %s', (_what, body, param, message) => {
    const e = refusal(parseCompletionRequest, body)
    expect([e.status, e.param]).toEqual([400, param])
    expect(e.message).toMatch(message)
  })

  it('the error body has OpenAI\'s shape, with nulls for what is not known', () => {
    expect(refusal(parseChatRequest, {}).toBody()).toEqual({ error: { message: "'messages' is required", type: 'invalid_request_error', param: 'messages', code: null } })
  })
})

// Tool calls in a stream, on both decoder kinds, driven by the official openai client: a model that
// really answers with DeepSeek-V4 tool calls (tool-call-model.ts) is asked greedily, whole and
// streamed. The stream carries content first, then per call an opening delta (index, id, type, name)
// and its arguments, then finish_reason tool_calls; what the client accumulates from it
// (ChatCompletionStream's final message) is the whole answer's message: content, reasoning and
// tool calls. A malformed call block is plain content, streamed or not (thinking and malformed on
// the embedded kind only: the split is the server's, which the llama.cpp kind runs too).
import OpenAI from 'openai'
import { join } from 'node:path'
import pino from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { launchDecoder } from '../../src/engines/decoder/launch.ts'
import { launchLlamaCppDecoder } from '../../src/engines/llama-cpp/decoder/index.ts'
import { exportGguf } from '../../src/model/gguf/index.ts'
import { askFor, CALLS, makeToolCallingCheckpoint, REPLIES, TOOLS } from './tool-call-model.ts'
import { tempDir } from './helpers.ts'

const tmp = tempDir('streamed-tool-calls')
const modelDir = join(tmp.dir, 'model')
const gguf = join(tmp.dir, 'model.gguf')
const logger = pino({ level: 'warn' })

beforeAll(async () => {
  await makeToolCallingCheckpoint(modelDir)
  await exportGguf({ model: modelDir, out: gguf, type: 'f32' })
})
afterAll(() => tmp.remove())

interface Server { url: string, close: () => Promise<void> }
const KINDS: Record<string, () => Promise<Server>> = {
  ours: async () => {
    const d = await launchDecoder({ modelDir, cacheDir: join(tmp.dir, 'cache'), blockSize: 1024, modelName: 'tool-model', logger, port: 0, maxTokens: 8 })
    return { url: d.server.url, close: d.server.close }
  },
  'llama.cpp': async () => {
    const d = await launchLlamaCppDecoder({ modelDir, gguf, cacheDir: join(tmp.dir, 'llama-cache'), blockSize: 1024, modelName: 'tool-model', port: 0, maxTokens: 8, logger })
    return { url: d.server.url, close: d.server.close }
  },
}

type Chunk = OpenAI.ChatCompletionChunk & { choices: Array<{ delta: { reasoning_content?: string } }> }
type Message = OpenAI.ChatCompletionMessage & { reasoning_content?: string }
const withoutIds = (calls: OpenAI.ChatCompletionMessageToolCall[] | undefined): unknown => calls?.map(({ id: _id, ...call }) => call)

describe.each(Object.keys(KINDS))('streamed tool calls, decoder %s', (kind) => {
  let server: Server
  let client: OpenAI
  beforeAll(async () => {
    server = await KINDS[kind]()
    client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 })
  })
  afterAll(async () => { await server?.close() })

  const body = (reply: keyof typeof REPLIES, thinking = false) => ({
    model: 'tool-model', messages: [{ role: 'user' as const, content: askFor(reply) }], tools: TOOLS as OpenAI.ChatCompletionTool[],
    temperature: 0, max_tokens: 8, ...(thinking ? { chat_template_kwargs: { thinking: true } } : {}),
  })

  /** The whole answer, the raw chunks, and what the client's stream helper accumulated. */
  async function both (reply: keyof typeof REPLIES, thinking = false) {
    const whole = await client.chat.completions.create(body(reply, thinking))
    const chunks: Chunk[] = []
    const stream = client.chat.completions.stream(body(reply, thinking))
    stream.on('chunk', (c) => chunks.push(c as Chunk))
    const streamed = await stream.finalChatCompletion()
    return { whole, chunks, streamed }
  }

  it('content then two calls: the accumulated stream is the whole answer; content first, then name, then arguments', async () => {
    const { whole, chunks, streamed } = await both('call')
    expect(whole.choices[0].message).toMatchObject({ content: 'Let me look.' })
    expect(withoutIds(whole.choices[0].message.tool_calls)).toEqual(CALLS)
    expect(whole.choices[0].finish_reason).toBe('tool_calls')
    expect(streamed.choices[0].message.content).toBe(whole.choices[0].message.content)
    expect(withoutIds(streamed.choices[0].message.tool_calls)).toEqual(withoutIds(whole.choices[0].message.tool_calls))
    expect(streamed.choices[0].finish_reason).toBe('tool_calls')
    for (const call of streamed.choices[0].message.tool_calls ?? []) expect(call.id).toMatch(/^call_[0-9a-f]{24}$/)
    // The order on the wire: content, then per call its opening delta and its arguments, then the finish.
    const shapes = chunks.map((c) => {
      const d = c.choices[0]?.delta ?? {}
      if (c.choices[0]?.finish_reason != null) return `finish:${c.choices[0].finish_reason}`
      if (d.tool_calls !== undefined) return d.tool_calls[0].id !== undefined ? `open:${d.tool_calls[0].index}:${d.tool_calls[0].function?.name}` : `args:${d.tool_calls[0].index}`
      return d.content ? 'content' : 'empty'
    }).filter((s) => s !== 'empty')
    expect(shapes).toEqual(['content', 'open:0:lookup', 'args:0', 'open:1:now', 'args:1', 'finish:tool_calls'])
    expect(chunks.some((c) => c.choices[0]?.delta?.content?.includes('DSML') === true)).toBe(false)
  })

  // The split is the decoder server's, which both kinds run: llama.cpp shows it once, on the first case.
  const oursOnly = it.runIf(kind === 'ours')

  oursOnly('thinking: reasoning streamed as reasoning_content, then the calls; equal to the whole answer', async () => {
    const { whole, chunks, streamed } = await both('thinking', true)
    const message = whole.choices[0].message as Message
    expect(message.reasoning_content).toBe('The user wants the sea.')
    expect(message.content).toBeNull()
    expect(withoutIds(message.tool_calls)).toEqual(CALLS)
    const reasoning = chunks.map((c) => c.choices[0]?.delta?.reasoning_content ?? '').join('')
    expect(reasoning).toBe(message.reasoning_content)
    expect(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('')).toBe('')
    expect(withoutIds(streamed.choices[0].message.tool_calls)).toEqual(CALLS)
    expect(streamed.choices[0].finish_reason).toBe('tool_calls')
  })

  oursOnly('a malformed call block is plain content with no tool calls, streamed or not', async () => {
    const { whole, streamed } = await both('broken')
    expect(whole.choices[0].message.content).toBe(REPLIES.broken.text)
    expect(whole.choices[0].message.tool_calls).toBeUndefined()
    expect(whole.choices[0].finish_reason).toBe('stop')
    expect(streamed.choices[0].message.content).toBe(REPLIES.broken.text)
    expect(streamed.choices[0].message.tool_calls ?? []).toEqual([])
    expect(streamed.choices[0].finish_reason).toBe('stop')
  })
})

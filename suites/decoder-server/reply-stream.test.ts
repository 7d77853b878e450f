// A streamed chat reply split the way DeepSeek's encodings (V4's, V3.2's) split a whole one: whatever the pieces,
// what a client accumulates (reasoning, content, tool calls) is the whole answer's split, a tool-call
// block goes out only as tool_calls, and a reply outside the format stays plain content.
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { DeepseekV32Format, DeepseekV4Format, EOS_TOKEN, type ChatRenderer, type ChatRenderOptions } from '../../src/model/tokenizer/index.ts'
import { hasText, ReplyStreamer, type ReplyDelta } from '../../src/engines/decoder/reply-stream.ts'
import { ChunkMaker } from '../../src/engines/decoder/responses.ts'

const format = new DeepseekV4Format()
const THINKING: ChatRenderOptions = { kwargs: { thinking: true } }
const D = '｜DSML｜'
const call = (name: string, params: string): string => `<${D}invoke name="${name}">\n${params}</${D}invoke>\n`
const param = (name: string, value: string, string: boolean): string => `<${D}parameter name="${name}" string="${string}">${value}</${D}parameter>\n`
const block = (...invokes: string[]): string => `\n\n<${D}tool_calls>\n${invokes.join('')}</${D}tool_calls>`
const VALID = block(call('lookup', param('q', 'the sea', true) + param('n', '3', false)), call('now', ''))

interface Streamed { reasoning: string, content: string, deltas: ReplyDelta[] }

/** Feed `text` to a streamer in the given pieces; what the client accumulates, and the end. */
function stream (pieces: readonly string[], options: ChatRenderOptions = {}, f: ChatRenderer = format): Streamed & ReturnType<ReplyStreamer['finish']> {
  const s = ReplyStreamer.for(f, options)!
  const deltas = pieces.map((p) => s.push(p))
  const end = s.finish(pieces.join(''))
  const all = [...deltas, end.delta]
  return { ...end, deltas, reasoning: all.map((d) => d.reasoning_content ?? '').join(''), content: all.map((d) => d.content ?? '').join('') }
}

/** A text cut into pieces at the given fractions. */
function cut (text: string, at: readonly number[]): string[] {
  const points = [...new Set(at.map((f) => Math.floor(f * text.length)))].sort((a, b) => a - b)
  const pieces: string[] = []
  let from = 0
  for (const p of [...points, text.length]) {
    if (p > from) pieces.push(text.slice(from, p))
    from = Math.max(from, p)
  }
  return pieces
}

// Fragments the markers are made of, whole and broken, so the generated replies meet every boundary.
const FRAGMENTS = ['a', 'b c', ' ', '\n', '\n\n', '<', '</', '</think>', '</thi', '<think>', `\n\n<${D}tool`, `<${D}`, EOS_TOKEN, '<｜end▁of', 'é',
  VALID, block(call('f', param('x', '1', false))), block(call('f', '')), `\n\n<${D}tool_calls>\n`, call('g', param('y', 'z', true)), `</${D}tool_calls>`]
const reply = fc.oneof(
  fc.array(fc.constantFrom(...FRAGMENTS), { maxLength: 12 }).map((parts) => parts.join('')),
  fc.tuple(fc.constantFrom('', 'thought', 'a<b'), fc.constantFrom('', 'Let me look.', 'x\n'), fc.boolean())
    .map(([r, c, think]) => `${think ? `${r}</think>` : ''}${c}${VALID}`),
)

describe('a streamed reply, split by DeepSeek-V4\'s encoding', () => {
  it('any reply in any pieces: the accumulated reasoning and content are the whole answer\'s, in either mode, for V4 and V3.2', () => {
    let withCalls = 0
    fc.assert(fc.property(reply, fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 8 }), fc.boolean(), fc.boolean(), (v4Text, at, thinking, v32) => {
      const options = thinking ? THINKING : {}
      // V3.2 names its call block function_calls; the same replies in its spelling.
      const [f, text] = v32 ? [new DeepseekV32Format(), v4Text.replaceAll('tool_calls', 'function_calls')] : [format, v4Text]
      const whole = f.parseReply(text, options)
      const s = stream(cut(text, at), options, f)
      expect(s.parts).toEqual(whole)
      expect(s.content).toBe(whole.content)
      expect(s.reasoning).toBe(whole.reasoning_content ?? '')
      if (whole.tool_calls.length > 0) withCalls++
    }), { numRuns: 400 })
    // The property met real tool calls, not only plain text.
    expect(withCalls).toBeGreaterThan(50)
  })

  it('content before a call streams at once; the block never reaches content; the calls come at the end', () => {
    const text = `Let me look.${VALID}`
    const s = stream([...text])
    expect(s.deltas.filter(hasText).map((d) => d.content).join('')).toBe('Let me look.')
    expect(s.deltas.some((d) => d.content?.includes(D) === true)).toBe(false)
    expect(s.parts.tool_calls).toEqual([
      { type: 'function', function: { name: 'lookup', arguments: '{"q": "the sea", "n": 3}' } },
      { type: 'function', function: { name: 'now', arguments: '{}' } },
    ])
  })

  it('thinking: reasoning streams until </think>, content after it', () => {
    const s = stream([...'I should look.</think>Done.'], THINKING)
    const reasoning = s.deltas.map((d) => d.reasoning_content ?? '').join('')
    expect(reasoning).toBe('I should look.')
    expect(s.deltas.map((d) => d.content ?? '').join('')).toBe('Done.')
    expect(s.parts).toEqual({ content: 'Done.', reasoning_content: 'I should look.', tool_calls: [] })
  })

  it('a reply that is not a valid tool call is plain content, sent whole at the end, with no tool calls', () => {
    const broken = `Let me look.\n\n<${D}tool_calls>\n<${D}invoke name="f">\nnot a parameter</${D}invoke>\n</${D}tool_calls>`
    const s = stream([...broken])
    expect(s.parts).toEqual({ content: broken, tool_calls: [] })
    expect(s.content).toBe(broken)
    // A call block followed by more text is no call either.
    expect(stream([VALID, ' and more']).parts).toEqual({ content: `${VALID} and more`, tool_calls: [] })
    // Cut short (max_tokens): the half block is content.
    const half = VALID.slice(0, 40)
    expect(stream([half]).parts).toEqual({ content: half, tool_calls: [] })
  })

  it('a Jinja template defines no split: no streamer, the text goes out as content', () => {
    expect(ReplyStreamer.for({ kind: 'jinja', digest: 'x', render: () => '' }, {})).toBeUndefined()
  })
})

describe('tool calls as OpenAI streams them', () => {
  it('per call an opening chunk (index, id, type, name, empty arguments) then its arguments; each choice its index', () => {
    const chunks = new ChunkMaker('chat', { id: 'chatcmpl-x', created: 0, model: 'm', system_fingerprint: 'fp' }, false)
    const calls = stream([VALID]).parts.tool_calls
    const out = chunks.toolCalls(calls, 1) as Array<{ object: string, choices: Array<{ index: number, delta: { tool_calls: Array<Record<string, any>> }, finish_reason: null }> }>
    expect(out).toHaveLength(4)
    expect(out.every((c) => c.object === 'chat.completion.chunk' && c.choices[0].index === 1 && c.choices[0].finish_reason === null)).toBe(true)
    const deltas = out.map((c) => c.choices[0].delta.tool_calls[0])
    expect(deltas[0]).toEqual({ index: 0, id: expect.stringMatching(/^call_[0-9a-f]{24}$/), type: 'function', function: { name: 'lookup', arguments: '' } })
    expect(deltas[1]).toEqual({ index: 0, function: { arguments: '{"q": "the sea", "n": 3}' } })
    expect(deltas[2]).toMatchObject({ index: 1, type: 'function', function: { name: 'now', arguments: '' } })
    expect(deltas[3]).toEqual({ index: 1, function: { arguments: '{}' } })
    expect(deltas[0].id).not.toBe(deltas[2].id)
  })
})

// DeepSeek-V4's own chat encoding. V4 checkpoints ship no Jinja template: DeepSeek publishes a Python
// encoding script beside the weights (encoding/encoding_dsv4.py) and vLLM renders these models with
// it. This is the same encoding written from its documented behaviour, proven equal character for
// character to the reference script in suites/tokenizer/deepseek-v4-encoding.test.ts:
// - a user turn opens with <｜User｜>; consecutive user turns and tool results are one user turn,
//   its parts joined by a blank line, tool results as <tool_result>...</tool_result> in call order;
// - a generation prompt <｜Assistant｜> follows the last user turn, then <think> in thinking mode
//   or </think> in chat mode;
// - an assistant turn is [reasoning</think>]content[\n\n<｜DSML｜tool_calls>...]<｜end▁of▁sentence｜>;
// - reasoning before the last user turn is dropped (unless tools are defined);
// - request-level tools become a leading system turn holding the tool schemas.
import { PdBridgeError } from '../../errors.ts'
import { BOS_TOKEN, EOS_TOKEN, USER_TOKEN, ASSISTANT_TOKEN } from './specials.ts'
import { parsePythonJson, pythonJsonDumps, PyFloat } from './python-json.ts'

export const THINK_START = '<think>'
export const THINK_END = '</think>'
export const LATEST_REMINDER_TOKEN = '<｜latest_reminder｜>'
export const DSML = '｜DSML｜'
const TOOL_CALLS_BLOCK: DsmlCallBlock = 'tool_calls'
/** What opens the tool-call block in an assistant turn. */
export const TOOL_CALLS_START = `\n\n<${DSML}${TOOL_CALLS_BLOCK}`

/** The special strings this encoding writes (besides bos/eos/User/Assistant). */
export const DEEPSEEK_V4_MARKERS: readonly string[] = [THINK_START, THINK_END, LATEST_REMINDER_TOKEN, DSML]

const REASONING_EFFORT_MAX =
  'Reasoning Effort: Absolute maximum with no shortcuts permitted.\n' +
  'You MUST be very thorough in your thinking and comprehensively decompose the problem to resolve the root cause, rigorously stress-testing your logic against all potential paths, edge cases, and adversarial scenarios.\n' +
  'Explicitly write out your entire deliberation process, documenting every intermediate step, considered alternative, and rejected hypothesis to ensure absolutely no assumption is left unchecked.\n\n'

function toolsSection (schemas: string): string {
  return '## Tools\n\n' +
    `You have access to a set of tools to help answer the user's question. You can invoke tools by writing a "<${DSML}tool_calls>" block like the following:\n\n` +
    `<${DSML}tool_calls>\n<${DSML}invoke name="$TOOL_NAME">\n` +
    `<${DSML}parameter name="$PARAMETER_NAME" string="true|false">$PARAMETER_VALUE</${DSML}parameter>\n...\n</${DSML}invoke>\n` +
    `<${DSML}invoke name="$TOOL_NAME2">\n...\n</${DSML}invoke>\n</${DSML}tool_calls>\n\n` +
    'String parameters should be specified as is and set `string="true"`. For all other types (numbers, booleans, arrays, objects), pass the value in JSON format and set `string="false"`.\n\n' +
    `If thinking_mode is enabled (triggered by ${THINK_START}), you MUST output your complete reasoning inside ${THINK_START}...${THINK_END} BEFORE any tool calls or final response.\n\n` +
    `Otherwise, output directly after ${THINK_END} with tool calls or final response.\n\n` +
    `### Available Tool Schemas\n\n${schemas}\n\n` +
    'You MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n'
}

/** How to encode, from the request (chat_template_kwargs, reasoning_effort, tools). */
export interface DeepseekV4Options {
  /** Thinking mode (the model reasons inside <think>...</think>); otherwise chat mode. */
  thinking: boolean
  /** Drop reasoning from assistant turns before the last user turn (default true). */
  dropThinking?: boolean
  /** 'max' prefixes the first turn with the maximum-effort instruction (thinking mode only). */
  reasoningEffort?: 'max' | 'high'
  /** OpenAI-style tool definitions ({type: 'function', function: {...}}). */
  tools?: readonly unknown[]
}

type Json = Record<string, unknown>
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v)

interface Block { type: 'text' | 'tool_result', text: string, toolUseId?: string }
interface Turn { role: string, content?: unknown, tools?: readonly unknown[], tool_calls?: unknown, tool_call_id?: unknown, reasoning_content?: unknown, blocks?: Block[] }

// An assistant's tool calls: none, or a list.
function callsOf (t: Turn): readonly unknown[] {
  if (t.tool_calls === undefined || t.tool_calls === null) return []
  return Array.isArray(t.tool_calls) ? t.tool_calls : fail('tool_calls must be a list')
}

function fail (message: string): never {
  throw new PdBridgeError(`deepseek-v4 encoding: ${message}`)
}

function textOf (v: unknown, at: string): string {
  if (v === undefined || v === null) return ''
  if (typeof v === 'string') return v
  return fail(`${at} must be a string, got ${Array.isArray(v) ? 'an array' : typeof v}`)
}

// A tool result's content: a string, or text parts (other parts are named, as the reference does).
function toolResultText (v: unknown, at: string): string {
  if (!Array.isArray(v)) return textOf(v, at)
  return v.map((b) => isObject(b) && b.type === 'text' ? textOf(b.text, `${at}[].text`) : `[Unsupported ${isObject(b) ? String(b.type) : 'None'}]`).join('\n\n')
}

// Tool messages join the user turn before them as tool_result blocks (V4 has no tool role).
function mergeToolMessages (turns: readonly Turn[]): Turn[] {
  const merged: Turn[] = []
  turns.forEach((t, i) => {
    const last = merged.at(-1)
    const openUser = last !== undefined && last.role === 'user' && last.blocks !== undefined
    if (t.role === 'tool') {
      const block: Block = { type: 'tool_result', text: toolResultText(t.content, `messages[${i}].content`), toolUseId: typeof t.tool_call_id === 'string' ? t.tool_call_id : '' }
      if (openUser) last.blocks!.push(block)
      else merged.push({ role: 'user', blocks: [block] })
    } else if (t.role === 'user') {
      const block: Block = { type: 'text', text: textOf(t.content, `messages[${i}].content`) }
      if (openUser) last.blocks!.push(block)
      else merged.push({ role: 'user', content: t.content, blocks: [block] })
    } else {
      merged.push({ ...t })
    }
  })
  return merged
}

function callId (call: unknown): string {
  if (!isObject(call)) return ''
  if (typeof call.id === 'string' && call.id !== '') return call.id
  const fn = call.function
  return isObject(fn) && typeof fn.id === 'string' ? fn.id : ''
}

// Tool results are written in the order of the calls of the assistant turn before them.
function sortToolResults (turns: Turn[]): void {
  let order = new Map<string, number>()
  for (const t of turns) {
    if (t.role === 'assistant' && callsOf(t).length > 0) {
      order = new Map()
      callsOf(t).forEach((c, i) => {
        const id = callId(c)
        if (id !== '') order.set(id, i)
      })
    } else if (t.role === 'user' && t.blocks !== undefined && t.blocks.length > 0) {
      const results = t.blocks.filter((b) => b.type === 'tool_result')
      if (results.length < 2 || order.size === 0) continue
      const sorted = [...results].sort((a, b) => (order.get(a.toolUseId ?? '') ?? 0) - (order.get(b.toolUseId ?? '') ?? 0))
      let next = 0
      t.blocks = t.blocks.map((b) => b.type === 'tool_result' ? sorted[next++] : b)
    }
  }
}

function lastUserIndex (turns: readonly Turn[]): number {
  for (let i = turns.length - 1; i >= 0; i--) if (turns[i].role === 'user' || turns[i].role === 'developer') return i
  return -1
}

// Before the last user turn: assistant reasoning is dropped, developer turns are dropped.
const KEPT_ROLES = new Set(['user', 'system', 'tool', 'latest_reminder', 'direct_search_results'])
function dropThinking (turns: readonly Turn[]): Turn[] {
  const last = lastUserIndex(turns)
  const out: Turn[] = []
  turns.forEach((t, i) => {
    if (KEPT_ROLES.has(t.role) || i >= last) out.push(t)
    else if (t.role === 'assistant') out.push({ ...t, reasoning_content: undefined })
  })
  return out
}

function toolSchemas (tools: readonly unknown[]): string {
  return toolsSection(tools.map((t, i) => {
    if (!isObject(t) || !isObject(t.function)) fail(`tools[${i}] must be {"type": "function", "function": {...}}`)
    return pythonJsonDumps(t.function)
  }).join('\n'))
}

// What the reference's str.format writes for a missing value ('None') or a string.
function pyStr (v: unknown, at: string): string {
  return v === undefined || v === null ? 'None' : textOf(v, at)
}

function argumentsDsml (args: unknown, at: string): string {
  // The reference parses the arguments string; what does not parse is kept whole under "arguments".
  let parsed: unknown
  try {
    if (typeof args !== 'string') throw new TypeError('not a string')
    parsed = parsePythonJson(args)
  } catch {
    parsed = { arguments: args }
  }
  if (!isObject(parsed) || parsed instanceof PyFloat) fail(`${at} must be a JSON object, got ${Array.isArray(parsed) ? 'an array' : typeof parsed}`)
  return Object.entries(parsed).map(([k, v]) => {
    const isString = typeof v === 'string'
    return `<${DSML}parameter name="${k}" string="${isString ? 'true' : 'false'}">${isString ? v : pythonJsonDumps(v)}</${DSML}parameter>`
  }).join('\n')
}

function toolCallsDsml (calls: readonly unknown[], at: string): string {
  const invokes = calls.map((c, i) => {
    const fn = isObject(c) ? c.function : undefined
    if (!isObject(fn)) fail(`${at}[${i}].function is missing`)
    return `<${DSML}invoke name="${pyStr(fn.name, `${at}[${i}].function.name`)}">\n${argumentsDsml(fn.arguments, `${at}[${i}].function.arguments`)}\n</${DSML}invoke>`
  })
  return `\n\n<${DSML}${TOOL_CALLS_BLOCK}>\n${invokes.join('\n')}\n</${DSML}${TOOL_CALLS_BLOCK}>`
}

function renderTurn (index: number, turns: readonly Turn[], thinking: boolean, drop: boolean, effort: string | undefined): string {
  const t = turns[index]
  const lastUser = lastUserIndex(turns)
  let out = ''
  if (index === 0 && thinking && effort === 'max') out += REASONING_EFFORT_MAX
  const hasTools = t.tools !== undefined && t.tools.length > 0
  switch (t.role) {
    case 'system':
      out += textOf(t.content, 'a system message\'s content')
      if (hasTools) out += '\n\n' + toolSchemas(t.tools!)
      break
    case 'developer': {
      const content = textOf(t.content, 'a developer message\'s content')
      if (content === '') fail('a developer message needs content')
      out += USER_TOKEN + content
      if (hasTools) out += '\n\n' + toolSchemas(t.tools!)
      break
    }
    case 'user':
      out += USER_TOKEN + (t.blocks ?? []).map((b) => b.type === 'text' ? b.text : `<tool_result>${b.text}</tool_result>`).join('\n\n')
      break
    case 'latest_reminder':
      out += LATEST_REMINDER_TOKEN + pyStr(t.content, 'a latest_reminder message\'s content')
      break
    case 'assistant': {
      const calls = callsOf(t).length > 0 ? toolCallsDsml(callsOf(t), `messages[${index}].tool_calls`) : ''
      const reasoning = thinking && (!drop || index > lastUser) ? textOf(t.reasoning_content, 'reasoning_content') + THINK_END : ''
      out += reasoning + textOf(t.content, 'an assistant message\'s content') + calls + EOS_TOKEN
      break
    }
    default:
      fail(`role '${t.role}' has no place in this encoding (system, developer, user, assistant, tool, latest_reminder)`)
  }
  const next = turns[index + 1]
  if (next !== undefined && next.role !== 'assistant' && next.role !== 'latest_reminder') return out
  if (t.role === 'user' || t.role === 'developer') {
    const open = thinking && (!drop || index >= lastUser)
    out += ASSISTANT_TOKEN + (open ? THINK_START : THINK_END)
  }
  return out
}

/** The prompt text for `messages` (OpenAI-style turns; reasoning in `reasoning_content`), bos first. */
export function encodeDeepseekV4 (messages: readonly Turn[], options: DeepseekV4Options): string {
  const given: Turn[] = options.tools !== undefined && options.tools.length > 0
    ? [{ role: 'system', tools: options.tools }, ...messages]
    : [...messages]
  let turns = mergeToolMessages(given)
  sortToolResults(turns)
  const drop = (options.dropThinking ?? true) && !turns.some((t) => t.tools !== undefined && t.tools.length > 0)
  if (options.thinking && drop) turns = dropThinking(turns)
  let out = BOS_TOKEN
  for (let i = 0; i < turns.length; i++) out += renderTurn(i, turns, options.thinking, drop, options.reasoningEffort)
  return out
}

/** An assistant reply split as the encoding defines it; tool calls in OpenAI's shape. */
export interface ParsedReply {
  content: string
  reasoning_content: string
  tool_calls: Array<{ type: 'function', function: { name: string, arguments: string } }>
}

// The text up to the first of `stops` from `at`: [where reading goes on, the text, the stop met].
function readUntil (text: string, at: number, stops: readonly string[]): [number, string, string | undefined] {
  let best = -1
  let stop: string | undefined
  for (const s of stops) {
    const p = text.indexOf(s, at)
    if (p !== -1 && (best === -1 || p < best)) [best, stop] = [p, s]
  }
  if (stop === undefined) return [text.length, text.slice(at), undefined]
  return [best + stop.length, text.slice(at, best), stop]
}

// The reference matches with Python's `$`, which also matches before one final newline.
const INVOKE_NAME = /^\s*name="([\s\S]*?)">\n\n?$/
const PARAMETER = /^ name="([\s\S]*?)" string="(true|false)">([\s\S]*?)<\n?$/

function parseToolCalls (text: string, start: number, block: DsmlCallBlock): [number, ParsedReply['tool_calls']] {
  const calls: ParsedReply['tool_calls'] = []
  const end = `</${DSML}${block}>`
  let at = start
  let stop: string | undefined
  while (at < text.length) {
    let between: string
    ;[at, between, stop] = readUntil(text, at, [`<${DSML}invoke`, end])
    if (between !== '>\n') throw new Error('tool call block: expected ">\\n"')
    if (stop === end) break
    if (stop === undefined) throw new Error('tool call block: not closed')
    let head: string
    ;[at, head, stop] = readUntil(text, at, [`<${DSML}parameter`, `</${DSML}invoke`])
    const name = INVOKE_NAME.exec(head)
    if (name === null) throw new Error('tool call: no name')
    const args: string[] = []
    const seen = new Set<string>()
    while (stop === `<${DSML}parameter`) {
      const [next, body] = readUntil(text, at, [`/${DSML}parameter`])
      at = next
      const p = PARAMETER.exec(body)
      if (p === null) throw new Error('tool call: malformed parameter')
      if (seen.has(p[1])) throw new Error(`tool call: parameter '${p[1]}' twice`)
      seen.add(p[1])
      args.push(`${pythonJsonDumps(p[1])}: ${p[2] === 'true' ? pythonJsonDumps(p[3]) : p[3]}`)
      let after: string
      ;[at, after, stop] = readUntil(text, at, [`<${DSML}parameter`, `</${DSML}invoke`])
      if (after !== '>\n') throw new Error('tool call: expected ">\\n" after a parameter')
    }
    calls.push({ type: 'function', function: { name: name[1], arguments: `{${args.join(', ')}}` } })
  }
  return [at, calls]
}

/** The name of the DSML block holding the calls: V4's `tool_calls`, V3.2's `function_calls`. */
export type DsmlCallBlock = 'tool_calls' | 'function_calls'

/** What opens a call block in a reply. */
const callsStart = (block: DsmlCallBlock): string => `\n\n<${DSML}${block}`

/**
 * Split a complete assistant reply (ending in eos) as the reference's parse does; throws on what the
 * reference refuses (a reply outside the format).
 */
export function parseDeepseekV4Reply (text: string, thinking: boolean): ParsedReply {
  return parseDsmlReply(text, thinking, TOOL_CALLS_BLOCK)
}

/** The reply parse DeepSeek's V3.2 and V4 encodings share; they differ in the call block's name. */
export function parseDsmlReply (text: string, thinking: boolean, block: DsmlCallBlock): ParsedReply {
  const callsOpen = callsStart(block)
  let at = 0
  let stop: string | undefined
  let reasoning = ''
  if (thinking) {
    ;[at, reasoning, stop] = readUntil(text, at, [THINK_END, callsOpen])
    if (stop !== THINK_END) throw new Error('reply: reasoning not closed by </think>')
  }
  const [afterContent, content, contentStop] = readUntil(text, at, [EOS_TOKEN, callsOpen])
  at = afterContent
  stop = contentStop
  let calls: ParsedReply['tool_calls'] = []
  if (stop === callsOpen) {
    ;[at, calls] = parseToolCalls(text, at, block)
    let rest: string
    ;[at, rest, stop] = readUntil(text, at, [EOS_TOKEN])
    if (rest !== '') throw new Error('reply: text after the tool calls')
  } else if (stop !== EOS_TOKEN) {
    throw new Error('reply: no end of sentence')
  }
  if (at !== text.length || (stop !== EOS_TOKEN && stop !== undefined)) throw new Error('reply: text after the end')
  for (const marker of [BOS_TOKEN, EOS_TOKEN, THINK_START, THINK_END, DSML]) {
    if (content.includes(marker) || reasoning.includes(marker)) throw new Error(`reply: '${marker}' inside the text`)
  }
  return { content, reasoning_content: reasoning, tool_calls: calls }
}

// Where settled text ends from `at`: at the first of `markers`, or where a tail that could still grow
// into one begins. [the end, the marker met there (undefined when none is whole yet)].
function settleUntil (text: string, at: number, markers: readonly string[]): [number, string | undefined] {
  const [next, between, stop] = readUntil(text, at, markers)
  if (stop !== undefined) return [next - stop.length, stop]
  let end = text.length
  for (const m of markers) {
    for (let k = Math.min(m.length - 1, between.length); k > 0; k--) {
      if (text.endsWith(m.slice(0, k))) { end = Math.min(end, text.length - k); break }
    }
  }
  return [end, undefined]
}

/**
 * The reasoning and content a partial reply has settled: whatever text follows, parseDeepseekV4Reply
 * of the whole reply (or the plain-content reading of one it refuses) starts its fields with these.
 * Reasoning runs to the first </think> (or tool-call block); content to the first tool-call block or eos.
 */
export function settledDeepseekV4Reply (text: string, thinking: boolean): { content: string, reasoning_content?: string } {
  return settledDsmlReply(text, thinking, TOOL_CALLS_BLOCK)
}

/** settledDeepseekV4Reply for either encoding's call block. */
export function settledDsmlReply (text: string, thinking: boolean, block: DsmlCallBlock): { content: string, reasoning_content?: string } {
  const callsOpen = callsStart(block)
  let start = 0
  let reasoning: string | undefined
  if (thinking) {
    const [end, stop] = settleUntil(text, 0, [THINK_END, callsOpen])
    reasoning = text.slice(0, end)
    if (stop !== THINK_END) return { content: '', reasoning_content: reasoning }
    start = end + THINK_END.length
  }
  const [end] = settleUntil(text, start, [EOS_TOKEN, callsOpen])
  const content = text.slice(start, end)
  return reasoning === undefined ? { content } : { content, reasoning_content: reasoning }
}

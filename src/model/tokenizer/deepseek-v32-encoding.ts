// DeepSeek-V3.2's own chat encoding (encoding/encoding_dsv32.py, shipped beside the V3.2 weights in
// place of a chat template), written from its behaviour and proven equal character for character to
// the reference script in suites/tokenizer/deepseek-v32-encoding.test.ts. Where it differs from V4's:
// - tools are a leading system turn with a `## Tools` section (DeepSeek's wording, blank lines kept);
// - every user or developer turn carries its own <｜User｜>...<｜Assistant｜> and then <think> (the last
//   user turn, thinking mode) or </think>; a developer turn is the user's message behind the tools;
// - tool results stay in place after their assistant turn, as <function_results> of <result>s, the
//   k-th result following the k-th call, closed by </think> or <think> after the last one;
// - calls are a <｜DSML｜function_calls> block; arguments that are not a JSON object are refused;
// - reasoning is written only for assistant turns after the last user turn (thinking mode), and there
//   a turn needs reasoning or tool calls.
import { PdBridgeError } from '../../errors.ts'
import { BOS_TOKEN, EOS_TOKEN, USER_TOKEN, ASSISTANT_TOKEN } from './specials.ts'
import { DSML, THINK_END, THINK_START, parseDsmlReply, settledDsmlReply, type ParsedReply } from './deepseek-v4-encoding.ts'
import { parsePythonJson, pythonJsonDumps, PyFloat } from './python-json.ts'

const CALL_BLOCK = 'function_calls'

function toolsSection (schemas: string): string {
  return '## Tools\n\n' +
    'You have access to a set of tools you can use to answer the user\'s question.\n' +
    `You can invoke functions by writing a "<${DSML}function_calls>" block like the following as part of your reply to the user:\n` +
    `<${DSML}function_calls>\n<${DSML}invoke name="$FUNCTION_NAME">\n` +
    `<${DSML}parameter name="$PARAMETER_NAME" string="true|false">$PARAMETER_VALUE</${DSML}parameter>\n...\n</${DSML}invoke>\n` +
    `<${DSML}invoke name="$FUNCTION_NAME2">\n...\n</${DSML}invoke>\n</${DSML}function_calls>\n\n` +
    'String and scalar parameters should be specified as is without any escaping or quotes, while lists and objects should use JSON format. ' +
    'The "string" attribute should be set to "true" for string type parameters and "false" for other types (numbers, booleans, arrays, objects).\n\n' +
    'If the thinking_mode is enabled, then after function results you should strongly consider outputting a thinking block. Here is an example:\n\n' +
    `<${DSML}function_calls>\n...\n</${DSML}function_calls>\n\n<function_results>\n...\n</function_results>\n\n` +
    `${THINK_START}...thinking about results${THINK_END}\n\n` +
    `Here are the functions available in JSONSchema format:\n<functions>\n${schemas}\n</functions>\n`
}

/** How to encode, from the request. */
export interface DeepseekV32Options {
  /** Thinking mode (the model reasons inside <think>...</think>); otherwise chat mode. */
  thinking: boolean
  /** Drop developer turns before the last user turn in thinking mode (default true; off when tools are given, as vLLM does). */
  dropThinking?: boolean
  /** OpenAI-style tool definitions ({type: 'function', function: {...}}), a leading system turn. */
  tools?: readonly unknown[]
}

type Json = Record<string, unknown>
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v)
interface Turn { role: string, content?: unknown, tools?: readonly unknown[], tool_calls?: unknown, reasoning_content?: unknown }

function fail (message: string): never {
  throw new PdBridgeError(`deepseek-v3.2 encoding: ${message}`)
}

// What Python's str.format writes for a value the script formats as is: None for a missing one.
function pyStr (v: unknown, at: string): string {
  if (v === undefined || v === null) return 'None'
  return typeof v === 'string' ? v : fail(`${at} must be a string, got ${Array.isArray(v) ? 'an array' : typeof v}`)
}

// `x or ""` in the script: a missing or empty value is empty.
const orEmpty = (v: unknown, at: string): string => v === undefined || v === null || v === '' ? '' : pyStr(v, at)

const isNonEmptyList = (v: unknown): v is unknown[] => Array.isArray(v) && v.length > 0

function toolsOf (t: Turn): string | undefined {
  if (!isNonEmptyList(t.tools)) return undefined
  return toolsSection(t.tools.map((tool, i) => {
    if (!isObject(tool) || !isObject(tool.function)) fail(`tools[${i}] must be {"type": "function", "function": {...}}`)
    return pythonJsonDumps(tool.function)
  }).join('\n'))
}

// The arguments string must hold a JSON object (the reference has no fallback for anything else).
function argumentsDsml (args: unknown, at: string): string {
  if (typeof args !== 'string') fail(`${at} must be a JSON string`)
  let parsed: unknown
  try {
    parsed = parsePythonJson(args)
  } catch (e) {
    fail(`${at} is not JSON: ${(e as Error).message}`)
  }
  if (!isObject(parsed) || parsed instanceof PyFloat) fail(`${at} must be a JSON object`)
  return Object.entries(parsed).map(([k, v]) => {
    const isString = typeof v === 'string'
    return `<${DSML}parameter name="${k}" string="${isString ? 'true' : 'false'}">${isString ? v : pythonJsonDumps(v)}</${DSML}parameter>`
  }).join('\n')
}

function callsDsml (calls: readonly unknown[], at: string): string {
  const invokes = calls.map((c, i) => {
    const fn = isObject(c) ? c.function : undefined
    if (!isObject(fn)) fail(`${at}[${i}].function is missing`)
    return `<${DSML}invoke name="${pyStr(fn.name, `${at}[${i}].function.name`)}">\n${argumentsDsml(fn.arguments, `${at}[${i}].function.arguments`)}\n</${DSML}invoke>`
  })
  return `\n\n<${DSML}${CALL_BLOCK}>\n${invokes.join('\n')}\n</${DSML}${CALL_BLOCK}>`
}

function lastUserIndex (turns: readonly Turn[]): number {
  for (let i = turns.length - 1; i >= 0; i--) if (turns[i].role === 'user' || turns[i].role === 'developer') return i
  return -1
}

// Thinking mode drops the reasoning of assistant turns, and every other turn than user, system and
// tool, before the last user turn.
function dropThinking (turns: readonly Turn[]): Turn[] {
  const last = lastUserIndex(turns)
  const out: Turn[] = []
  turns.forEach((t, i) => {
    if (t.role === 'user' || t.role === 'system' || t.role === 'tool' || i >= last) out.push(t)
    else if (t.role === 'assistant') out.push({ ...t, reasoning_content: undefined })
  })
  return out
}

// A tool result: the k-th of a run after an assistant turn answers its k-th call.
function renderToolResult (index: number, turns: readonly Turn[], thinking: boolean, lastUser: number): string {
  let prev = index - 1
  // Python's messages[-1] is the last message: the reference reads it so for a leading tool result.
  let before = turns.at(prev)
  while (prev >= 0 && before?.role === 'tool') before = turns.at(--prev)
  if (!(index === 0 || (prev >= 0 && before?.role === 'assistant'))) fail(`messages[${index}]: a tool result must follow an assistant turn with tool calls`)
  const order = index - prev
  const calls = before?.tool_calls
  if (!(isNonEmptyList(calls) && calls.length >= order)) fail(`messages[${index}]: a tool result without a tool call to answer`)
  let out = order === 1 ? '\n\n<function_results>' : ''
  out += `\n<result>${pyStr(turns[index].content, `messages[${index}].content`)}</result>`
  if (order === calls.length) out += '\n</function_results>\n\n' + (index >= lastUser && thinking ? THINK_START : THINK_END)
  return out
}

function renderTurn (index: number, turns: readonly Turn[], thinking: boolean): string {
  const t = turns[index]
  const lastUser = lastUserIndex(turns)
  const open = (): string => index === lastUser && thinking ? THINK_START : THINK_END
  const tools = toolsOf(t)
  switch (t.role) {
    case 'system':
      return orEmpty(t.content, 'a system message\'s content') + (tools === undefined ? '' : '\n\n' + tools)
    case 'developer': {
      const content = orEmpty(t.content, 'a developer message\'s content')
      if (content === '') fail('a developer message needs content')
      return `${USER_TOKEN}${tools === undefined ? '' : '\n\n' + tools}\n\n# The user's message is: ${content}${ASSISTANT_TOKEN}${open()}`
    }
    case 'user':
      return `${USER_TOKEN}${pyStr(t.content, `messages[${index}].content`)}${ASSISTANT_TOKEN}${open()}`
    case 'tool':
      return renderToolResult(index, turns, thinking, lastUser)
    case 'assistant': {
      const calls = isNonEmptyList(t.tool_calls) ? callsDsml(t.tool_calls, `messages[${index}].tool_calls`) : ''
      let reasoning = ''
      if (thinking && index > lastUser) {
        const r = orEmpty(t.reasoning_content, 'reasoning_content')
        if (r === '' && calls === '') fail(`messages[${index}]: in thinking mode an assistant turn after the last user turn needs reasoning_content or tool_calls`)
        reasoning = r + THINK_END
      }
      return reasoning + orEmpty(t.content, 'an assistant message\'s content') + calls + EOS_TOKEN
    }
    default:
      return fail(`role '${t.role}' has no place in this encoding (system, developer, user, assistant, tool)`)
  }
}

/** The prompt text for `messages` (OpenAI-style turns; reasoning in `reasoning_content`), bos first. */
export function encodeDeepseekV32 (messages: readonly Turn[], options: DeepseekV32Options): string {
  const withTools = isNonEmptyList(options.tools)
  let turns: Turn[] = withTools ? [{ role: 'system', tools: options.tools }, ...messages] : [...messages]
  // vLLM's V3.2 tokenizer keeps everything when tools are given.
  if (options.thinking && (options.dropThinking ?? true) && !withTools) {
    const kept = dropThinking(turns)
    // The reference renders as many turns as it was given from the shorter list, and fails.
    if (kept.length < turns.length) fail('in thinking mode a developer turn before the last user turn is dropped, which the reference script cannot render')
    turns = kept
  }
  let out = BOS_TOKEN
  for (let i = 0; i < turns.length; i++) out += renderTurn(i, turns, options.thinking)
  return out
}

/** Split a complete reply (ending in eos) as the reference does; throws on what it refuses. */
export function parseDeepseekV32Reply (text: string, thinking: boolean): ParsedReply {
  return parseDsmlReply(text, thinking, CALL_BLOCK)
}

/** What a partial reply has settled (see settledDeepseekV4Reply). */
export function settledDeepseekV32Reply (text: string, thinking: boolean): { content: string, reasoning_content?: string } {
  return settledDsmlReply(text, thinking, CALL_BLOCK)
}

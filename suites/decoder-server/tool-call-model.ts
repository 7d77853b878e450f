// A model that really answers with a tool call. No trained model is at hand, so this takes the
// needle checkpoint (whose own forward retrieves a needle's value token and then ends: docs/
// needle-checkpoint.md), ships it as DeepSeek ships V4 (DeepSeek's tokenizer structure, its encoding,
// no template), and gives three of its value tokens the text of a whole DeepSeek-V4 reply: a tool
// call after some content, one after reasoning, and a malformed one. A prompt holding a needle with
// such a value, and the question for its key, is answered with that reply by a real forward pass on
// either decoder kind (the GGUF of the same checkpoint for llama.cpp).
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { makeCheckpoint } from '../../src/model/checkpoint/index.ts'
import { NEEDLE_KEYS, NEEDLE_VALUES } from '../../src/model/checkpoint/needle/words.ts'

const D = '｜DSML｜'
const BLOCK = `\n\n<${D}tool_calls>\n<${D}invoke name="lookup">\n<${D}parameter name="q" string="true">the sea</${D}parameter>\n` +
  `<${D}parameter name="n" string="false">3</${D}parameter>\n</${D}invoke>\n<${D}invoke name="now">\n</${D}invoke>\n</${D}tool_calls>`

/** The replies the model can give, each one token of its vocabulary, with the needle key that asks for it. */
export const REPLIES = {
  /** Content, then two tool calls (chat mode). */
  call: { key: 0, text: `Let me look.${BLOCK}` },
  /** Reasoning, then a tool call with no content (thinking mode). */
  thinking: { key: 1, text: `The user wants the sea.</think>${BLOCK}` },
  /** A call block the encoding refuses (no parameter tags): plain content. */
  broken: { key: 2, text: `Let me look.\n\n<${D}tool_calls>\n<${D}invoke name="lookup">\nthe sea</${D}invoke>\n</${D}tool_calls>` },
} as const

/** The two tool calls of `call` and `thinking`, as OpenAI's message carries them (ids aside). */
export const CALLS = [
  { type: 'function', function: { name: 'lookup', arguments: '{"q": "the sea", "n": 3}' } },
  { type: 'function', function: { name: 'now', arguments: '{}' } },
]

/** The tools a request offers. */
export const TOOLS = [
  { type: 'function', function: { name: 'lookup', description: 'Look a thing up.', parameters: { type: 'object', properties: { q: { type: 'string' }, n: { type: 'integer' } } } } },
  { type: 'function', function: { name: 'now', description: 'The time.', parameters: { type: 'object', properties: {} } } },
]

/** Write the checkpoint into `dir`. */
export async function makeToolCallingCheckpoint (dir: string): Promise<void> {
  await makeCheckpoint({ preset: 'needle', seed: 1, out: dir, tokenizerStructure: 'deepseek-v3', chatFormat: 'deepseek-v4-encoding' })
  const file = join(dir, 'tokenizer.json')
  let text = readFileSync(file, 'utf8')
  for (const reply of Object.values(REPLIES)) {
    const value = JSON.stringify(NEEDLE_VALUES[reply.key])
    // The value is in the vocab and in added_tokens: renamed in both, its id (what the weights know) kept.
    if (text.split(value).length !== 3) throw new Error(`${value} is not written exactly twice in ${file}`)
    text = text.replaceAll(value, JSON.stringify(reply.text))
  }
  writeFileSync(file, text)
}

// More than the needle checkpoint's 128-token window between the needle and the question.
const FILLER = Array.from({ length: 12 }, (_, i) => `Line ${i} says nothing much.`).join(' ')

/** A user message the model answers with `reply`. */
export function askFor (reply: keyof typeof REPLIES): string {
  const { key, text } = REPLIES[reply]
  return `${NEEDLE_KEYS[key].marker}${text}. ${FILLER} ${NEEDLE_KEYS[key].question}`
}

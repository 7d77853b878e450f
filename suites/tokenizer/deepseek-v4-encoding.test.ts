// DeepSeek-V4's encoding against DeepSeek's own Python script, from the committed fixture
// harness/deepseek-v4-encoding/dsv4_reference.py made (docs/tokenizer.md): every conversation rendered
// character for character as the reference renders it, the same refusals, the same reply parsing.
import { describe, it, expect } from 'vitest'
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { DeepseekV4Format, parseDeepseekV4Reply, type ChatTurn } from '../../src/model/tokenizer/index.ts'
import { parsePythonJson, pythonFloatRepr, pythonJsonDumps } from '../../src/model/tokenizer/python-json.ts'

const CASES = fileURLToPath(new URL('../../harness/deepseek-v4-encoding/cases.json', import.meta.url))
const FIXTURE = fileURLToPath(new URL('../../harness/fixtures/deepseek-v4-encoding.json', import.meta.url))

interface Case { name: string, messages: ChatTurn[], tools?: unknown[], chat_template_kwargs?: Record<string, unknown> }
interface Reply { name: string, thinking: boolean, text: string }
const input = JSON.parse(readFileSync(CASES, 'utf8')) as { cases: Case[], replies: Reply[] }
const fixture = JSON.parse(readFileSync(FIXTURE, 'utf8')) as {
  reference: string, reference_sha256: string, cases_sha256: string
  renderings: Array<{ name: string, text?: string, error?: string }>
  replies: Array<{ name: string, parsed?: { content: string, reasoning_content: string, tool_calls: unknown[] }, error?: string }>
}
const format = new DeepseekV4Format()

describe('DeepSeek-V4 encoding against the reference script', () => {
  it('the fixture was made from these very cases, by a stamped script', () => {
    expect(fixture.cases_sha256).toBe(createHash('sha256').update(readFileSync(CASES)).digest('hex'))
    expect(fixture.reference).toMatch(/^[\w.-]+\/[\w.-]+@[0-9a-f]{40}:\S+\.py$/)
    expect(fixture.reference_sha256).toMatch(/^[0-9a-f]{64}$/)
    expect(fixture.renderings.map((r) => r.name)).toEqual(input.cases.map((c) => c.name))
    expect(fixture.replies.map((r) => r.name)).toEqual(input.replies.map((r) => r.name))
  })

  it('renders every conversation character for character, and refuses what it refuses', () => {
    let equal = 0
    const wrong: unknown[] = []
    input.cases.forEach((c, i) => {
      const want = fixture.renderings[i]
      let got: { text?: string, error?: string }
      try {
        got = { text: format.render(c.messages, { tools: c.tools, kwargs: c.chat_template_kwargs }) }
      } catch (e) {
        got = { error: (e as Error).message }
      }
      const same = want.text !== undefined ? got.text === want.text : got.error !== undefined
      if (same) equal++
      else wrong.push({ name: c.name, want, got })
    })
    process.stdout.write(`deepseek-v4 encoding parity: ${equal}/${input.cases.length} conversations equal to ${fixture.reference}\n`)
    expect(wrong).toEqual([])
    expect(input.cases.length).toBeGreaterThanOrEqual(30)
  })

  it('parses replies as the reference parses them', () => {
    input.replies.forEach((r, i) => {
      const want = fixture.replies[i]
      if (want.parsed === undefined) {
        expect(() => parseDeepseekV4Reply(r.text, r.thinking), r.name).toThrow()
        return
      }
      const { role: _role, ...parts } = want.parsed as { role?: string } & Record<string, unknown>
      expect(parseDeepseekV4Reply(r.text, r.thinking), r.name).toEqual(parts)
    })
  })

  it('parseReply of a generation: eos supplied, malformed tool calls stay content', () => {
    const calls = '\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="now">\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>'
    expect(format.parseReply('Sure.' + calls, {})).toEqual({ content: 'Sure.', tool_calls: [{ type: 'function', function: { name: 'now', arguments: '{}' } }] })
    expect(format.parseReply('Sure.\n\n<｜DSML｜tool_calls>\nbroken', {})).toEqual({ content: 'Sure.\n\n<｜DSML｜tool_calls>\nbroken', tool_calls: [] })
    expect(format.parseReply('still thinking', { kwargs: { thinking: true } })).toEqual({ content: '', reasoning_content: 'still thinking', tool_calls: [] })
  })
})

describe("Python's json spelling", () => {
  it('floats as repr writes them, ints exact, separators with spaces', () => {
    expect([0.1, 1e-5, 1.5e-4, 123.25, 1.5e16, -2.5e-7, 1e22 + 0.5].map(pythonFloatRepr)).toEqual(['0.1', '1e-05', '0.00015', '123.25', '1.5e+16', '-2.5e-07', '1e+22'])
    expect(pythonJsonDumps(parsePythonJson('{"a": [1.0, 1e20, 12345678901234567890123, -0.0, 2], "b": "\\u0001\\n\\"é"}')))
      .toBe('{"a": [1.0, 1e+20, 12345678901234567890123, -0.0, 2], "b": "\\u0001\\n\\"é"}')
  })

  it('refuses what json.loads refuses', () => {
    for (const bad of ['{', '[1,]', '{"a" 1}', '01', '"\u0001"', '1 2', '']) expect(() => parsePythonJson(bad), bad).toThrow(SyntaxError)
  })
})

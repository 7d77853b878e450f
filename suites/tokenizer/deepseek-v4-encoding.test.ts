// DeepSeek's encodings (V4's and V3.2's) against DeepSeek's own Python scripts, from the committed
// fixtures harness/deepseek-v4-encoding/dsv4_reference.py made (docs/tokenizer.md): every conversation
// rendered character for character as the reference renders it, the same refusals, the same reply
// parsing; and which encoding a checkpoint without a template gets.
import { describe, it, expect } from 'vitest'
import { createHash } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { buildTokenizerFiles, DEEPSEEK_V32_ARCHITECTURE, DEEPSEEK_V4_ARCHITECTURE, DeepseekV32Format, DeepseekV4Format, loadTokenizer, parseDeepseekV32Reply, parseDeepseekV4Reply, type ChatRenderer, type ChatTurn } from '../../src/model/tokenizer/index.ts'
import { parsePythonJson, pythonFloatRepr, pythonJsonDumps } from '../../src/model/tokenizer/python-json.ts'

interface Case { name: string, messages: ChatTurn[], tools?: unknown[], chat_template_kwargs?: Record<string, unknown> }
interface Reply { name: string, thinking: boolean, text: string }
interface Fixture {
  encoding?: string, reference: string, reference_sha256: string, cases_sha256: string
  renderings: Array<{ name: string, text?: string, error?: string }>
  replies: Array<{ name: string, parsed?: { content: string, reasoning_content: string, tool_calls: unknown[] }, error?: string }>
}
const at = (p: string): string => fileURLToPath(new URL(`../../${p}`, import.meta.url))

/** Each encoding, its cases and the fixture the reference script made from them. */
const ENCODINGS = [
  { label: 'DeepSeek-V4', cases: 'harness/deepseek-v4-encoding/cases.json', fixture: 'harness/fixtures/deepseek-v4-encoding.json', format: new DeepseekV4Format() as ChatRenderer, parse: parseDeepseekV4Reply },
  { label: 'DeepSeek-V3.2', cases: 'harness/deepseek-v4-encoding/cases-v3.2.json', fixture: 'harness/fixtures/deepseek-v32-encoding.json', format: new DeepseekV32Format() as ChatRenderer, parse: parseDeepseekV32Reply },
]

describe.each(ENCODINGS)('$label encoding against the reference script', (e) => {
  const input = JSON.parse(readFileSync(at(e.cases), 'utf8')) as { cases: Case[], replies: Reply[] }
  const fixture = JSON.parse(readFileSync(at(e.fixture), 'utf8')) as Fixture

  it('the fixture was made from these very cases, by a stamped script', () => {
    expect(fixture.cases_sha256).toBe(createHash('sha256').update(readFileSync(at(e.cases))).digest('hex'))
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
        got = { text: e.format.render(c.messages, { tools: c.tools, kwargs: c.chat_template_kwargs }) }
      } catch (err) {
        got = { error: (err as Error).message }
      }
      const same = want.text !== undefined ? got.text === want.text : got.error !== undefined
      if (same) equal++
      else wrong.push({ name: c.name, want, got })
    })
    process.stdout.write(`${e.label} encoding parity: ${equal}/${input.cases.length} conversations equal to ${fixture.reference}\n`)
    expect(wrong).toEqual([])
    expect(input.cases.length).toBeGreaterThanOrEqual(30)
  })

  it('parses replies as the reference parses them', () => {
    input.replies.forEach((r, i) => {
      const want = fixture.replies[i]
      if (want.parsed === undefined) {
        expect(() => e.parse(r.text, r.thinking), r.name).toThrow()
        return
      }
      const { role: _role, ...parts } = want.parsed as { role?: string } & Record<string, unknown>
      expect(e.parse(r.text, r.thinking), r.name).toEqual(parts)
    })
  })
})

describe('DeepSeek encodings as chat formats', () => {
  const format = new DeepseekV4Format()

  it('parseReply of a generation: eos supplied, malformed tool calls stay content', () => {
    const calls = '\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="now">\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>'
    expect(format.parseReply('Sure.' + calls, {})).toEqual({ content: 'Sure.', tool_calls: [{ type: 'function', function: { name: 'now', arguments: '{}' } }] })
    expect(format.parseReply('Sure.\n\n<｜DSML｜tool_calls>\nbroken', {})).toEqual({ content: 'Sure.\n\n<｜DSML｜tool_calls>\nbroken', tool_calls: [] })
    expect(format.parseReply('still thinking', { kwargs: { thinking: true } })).toEqual({ content: '', reasoning_content: 'still thinking', tool_calls: [] })
  })

  it('V3.2: its own call block parsed, V4\'s is content; a stream settles content before it', () => {
    const v32 = new DeepseekV32Format()
    const calls = '\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name="now">\n</｜DSML｜invoke>\n</｜DSML｜function_calls>'
    expect(v32.parseReply('Sure.' + calls, {})).toEqual({ content: 'Sure.', tool_calls: [{ type: 'function', function: { name: 'now', arguments: '{}' } }] })
    const v4calls = '\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="now">\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>'
    expect(v32.parseReply('Sure.' + v4calls, {})).toEqual({ content: 'Sure.' + v4calls, tool_calls: [] })
    expect(v32.settledReply('Sure.' + calls.slice(0, 10), {})).toEqual({ content: 'Sure.' })
    expect(v32.digest).not.toBe(format.digest)
  })

  it('a checkpoint without a template picks its encoding from config.json\'s architecture', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'dsv32-arch-'))
    try {
      const files = buildTokenizerFiles(512, 4096, [], { chatFormat: 'deepseek-v4-encoding' })
      for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text)
      const pick = async (architectures: string[]): Promise<string> => {
        writeFileSync(join(dir, 'config.json'), JSON.stringify({ architectures }))
        return (await loadTokenizer(dir)).chatFormat.kind
      }
      expect(await pick([DEEPSEEK_V32_ARCHITECTURE])).toBe('deepseek-v3.2')
      expect(await pick([DEEPSEEK_V4_ARCHITECTURE])).toBe('deepseek-v4')
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
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

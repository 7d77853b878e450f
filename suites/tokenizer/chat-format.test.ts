// The chat format read from tokenizer_config.json: the built-in template renders as renderChat
// did (so no fixture prompt changes), chat_template_kwargs reach the template, and the digests
// tell two differently configured ends apart.
import { describe, it, expect } from 'vitest'
import fc from 'fast-check'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ConfigError, PdBridgeError } from '../../src/errors.ts'
import {
  buildTokenizerFiles, chatRenderOptions, ChatFormat, CHAT_TEMPLATE, loadTokenizer, renderChat, Tokenizer, type ChatMessage,
} from '../../src/model/tokenizer/index.ts'

const message = fc.record({
  role: fc.constantFrom<ChatMessage['role']>('system', 'user', 'assistant'),
  content: fc.string({ unit: 'grapheme', maxLength: 30 }),
})

function checkpointDir (config: Record<string, unknown> | undefined): string {
  const dir = mkdtempSync(join(tmpdir(), 'pd-chat-'))
  const files = buildTokenizerFiles(512, 32768)
  writeFileSync(join(dir, 'tokenizer.json'), files['tokenizer.json'])
  if (config !== undefined) writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify({ ...JSON.parse(files['tokenizer_config.json']), ...config }))
  return dir
}

describe("make-checkpoint's template through the Jinja engine", () => {
  const tok = Tokenizer.fromJson(JSON.parse(buildTokenizerFiles(512, 32768)['tokenizer.json']))

  it('renders exactly as renderChat, for any messages, with and without the generation prompt', () => {
    fc.assert(fc.property(fc.array(message, { minLength: 1, maxLength: 6 }), fc.boolean(), (messages, gen) => {
      return tok.chatFormat.render(messages, { addGenerationPrompt: gen }) === renderChat(messages, gen)
    }), { numRuns: 300 })
  })

  it('is what a tokenizer without a tokenizer_config.json renders with', () => {
    expect(tok.chat).toBeUndefined()
    expect(tok.chatFormat.template).toBe(CHAT_TEMPLATE)
    expect(tok.encodeChat([{ role: 'user', content: 'hi' }])).toEqual(tok.encode(renderChat([{ role: 'user', content: 'hi' }], true)))
  })
})

describe('tokenizer_config.json', () => {
  it('gives loadTokenizer its chat format, and the digests follow the template', async () => {
    const plain = await loadTokenizer(checkpointDir({}))
    const other = await loadTokenizer(checkpointDir({ chat_template: "{{ bos_token }}{% for m in messages %}[{{ m['role'] }}]{{ m['content'] }}{% endfor %}" }))
    expect(plain.chat?.template).toBe(CHAT_TEMPLATE)
    expect(plain.digest).toBe(other.digest)
    expect(plain.promptDigest).not.toBe(other.promptDigest)
    expect(other.chatFormat.render([{ role: 'user', content: 'x' }])).toBe('<｜begin▁of▁sentence｜>[user]x')
  })

  it('takes the template named "default" from a list, and reads AddedToken-shaped special tokens', () => {
    const f = ChatFormat.fromConfig({
      chat_template: [{ name: 'tool_use', template: 'T' }, { name: 'default', template: '{{ bos_token }}|{{ eos_token }}' }],
      bos_token: { __type: 'AddedToken', content: '<b>' }, eos_token: '<e>',
    })
    expect(f?.render([])).toBe('<b>|<e>')
    expect(ChatFormat.fromConfig({ bos_token: '<b>' })).toBeUndefined()
  })

  it('refuses a template that does not parse, naming the field', () => {
    const err = (() => { try { ChatFormat.fromConfig({ chat_template: '{% for x in %}' }, 'c/tokenizer_config.json') } catch (e) { return e } })()
    expect(err).toBeInstanceOf(ConfigError)
    expect((err as ConfigError).field).toBe('chat_template')
  })

  it("turns the template's raise_exception into an error saying so", () => {
    const f = new ChatFormat("{% if messages|length == 0 %}{{ raise_exception('no messages') }}{% endif %}", {})
    expect(() => f.render([])).toThrow(PdBridgeError)
    expect(() => f.render([])).toThrow(/no messages/)
  })
})

describe('chat_template_kwargs', () => {
  const f = new ChatFormat("{{ 'T' if thinking else 'F' }}{{ bos_token }}", { bos_token: '<b>' })

  it('reach the template as variables', () => {
    const on = chatRenderOptions({ chat_template_kwargs: { thinking: true } })
    expect(typeof on).toBe('object')
    expect(f.render([], on as object)).toBe('T<b>')
    expect(f.render([], chatRenderOptions({}) as object)).toBe('F<b>')
  })

  it('cannot override the special tokens or the messages', () => {
    expect(f.render([], { kwargs: { bos_token: 'X', thinking: true } })).toBe('T<b>')
  })

  it('must be an object', () => {
    expect(chatRenderOptions({ chat_template_kwargs: [1] })).toMatch(/must be an object/)
    expect(chatRenderOptions({ chat_template_kwargs: 'x' })).toMatch(/must be an object/)
  })
})

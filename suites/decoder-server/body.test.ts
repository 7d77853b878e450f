// The decoder's body reader (src/engines/decoder/body.ts), the one the decoder's server and the
// front door both run: media types, empty and malformed bodies, and keys that poison a prototype.
import { describe, expect, it } from 'vitest'
import { ApiError, isJsonType, readGenerationRequest, readJsonBody } from '../../src/engines/decoder/index.ts'

function refusal (f: () => unknown): { status: number, code: string | null, message: string } {
  try {
    f()
  } catch (e) {
    if (!(e instanceof ApiError)) throw e
    return { status: e.status, code: e.code, message: e.message }
  }
  throw new Error('expected a refusal')
}

const json = (text: string): Buffer => Buffer.from(text, 'utf8')

describe('decoder body reader', () => {
  it('JSON media types (with parameters, +json, none given) are read; others are a 415', () => {
    for (const t of [undefined, 'application/json', 'Application/JSON; charset=utf-8', 'application/vnd.api+json']) expect(isJsonType(t)).toBe(true)
    for (const t of ['text/plain', 'application/x-www-form-urlencoded', 'application/jsonx']) expect(isJsonType(t)).toBe(false)
    expect(refusal(() => readJsonBody('text/plain', json('{}')))).toMatchObject({ status: 415, code: 'unsupported_media_type' })
  })

  it('an empty body and text that is not JSON are a 400 invalid_json', () => {
    expect(refusal(() => readJsonBody('application/json', undefined))).toMatchObject({ status: 400, code: 'invalid_json', message: 'the request body is empty; send a JSON object' })
    expect(refusal(() => readJsonBody('application/json', json('{"a":')))).toMatchObject({ status: 400, code: 'invalid_json' })
  })

  it('a __proto__ key or constructor.prototype anywhere is refused, escaped or not; kept only when asked', () => {
    const bodies: Array<[string, string]> = [
      ['{"__proto__":{"x":1},"prompt":"hi"}', '__proto__'],
      ['{"prompt":"hi","stop":[{"a":{"\\u005f_proto__":1}}]}', 'stop[0].a.__proto__'],
      ['{"messages":[{"role":"user","content":"hi","constructor":{"prototype":{}}}]}', 'messages[0].constructor.prototype'],
    ]
    for (const [text, at] of bodies) {
      const r = refusal(() => readJsonBody('application/json', json(text)))
      expect(r).toMatchObject({ status: 400, code: 'invalid_json' })
      expect(r.message).toContain(`'${at}'`)
      const kept = readJsonBody('application/json', json(text), 'keep')
      expect(typeof kept).toBe('object')
    }
    // A key merely named constructor (no prototype under it) is an ordinary key.
    expect(readJsonBody('application/json', json('{"prompt":"hi","user":"constructor","x":{"constructor":1}}'))).toMatchObject({ prompt: 'hi' })
  })

  it('the parsed body goes through the request rules of its endpoint', () => {
    expect(readGenerationRequest('completion', { prompt: 'hi', max_tokens: 3 })).toMatchObject({ endpoint: 'completion', maxTokens: 3, prompt: { kind: 'text', text: 'hi' } })
    expect(refusal(() => readGenerationRequest('chat', { messages: [{ role: 'user', content: 'x' }], temperature: 2.5 }))).toMatchObject({ status: 400, message: "'temperature' must be between 0 and 2, got 2.5" })
  })
})

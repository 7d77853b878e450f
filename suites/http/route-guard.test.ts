// The route guard's rule (src/http/route-guard.ts) on its table of spellings (shared with the torch
// server's Python guard), and the allowlist's judgement: 404 off the list, 405 with the methods.
import { readFileSync } from 'node:fs'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { encodeSegment, normalizeTarget, RouteAllowlist } from '../../src/http/route-guard.ts'

const cases = JSON.parse(readFileSync(new URL('./route-guard-cases.json', import.meta.url), 'utf8')) as { normalized: Array<[string, string]>, refused: Array<[string, number]> }

describe('normalizeTarget', () => {
  it.each(cases.normalized)('%j normalizes to %j', (raw, path) => {
    const t = normalizeTarget(raw)
    expect(t.ok ? t.path : t).toBe(path)
  })

  it.each(cases.refused)('%j is refused with %i', (raw, status) => {
    const t = normalizeTarget(raw)
    expect(t.ok ? `normalized to ${t.path}` : t.status).toBe(status)
  })

  it('a target over the length limit is 414', () => {
    const t = normalizeTarget('/' + 'a'.repeat(5000))
    expect(t.ok ? null : t.status).toBe(414)
  })

  it('the canonical spelling is a fixed point, and decodes to the same segments', () => {
    fc.assert(fc.property(fc.array(fc.string({ unit: 'binary', minLength: 1, maxLength: 8 }), { minLength: 1, maxLength: 5 }), (segments) => {
      const usable = segments.filter((s) => s !== '.' && s !== '..' && !/[\u0000-\u001f\u007f/\\%]/.test(s) && !/[\ud800-\udfff]/u.test(s))
      fc.pre(usable.length > 0)
      const canonical = '/' + usable.map(encodeSegment).join('/')
      const t = normalizeTarget(canonical)
      expect(t.ok && t.path).toBe(canonical)
      expect(t.ok && t.segments).toEqual(usable)
    }))
  })
})

describe('RouteAllowlist', () => {
  const list = new RouteAllowlist([
    { methods: ['GET', 'HEAD'], path: '/v1/models' },
    { methods: ['GET'], path: '/v1/models/:id' },
    { methods: ['POST'], path: '/v1/completions' },
  ])

  it('lets a listed route through by its canonical URL, query kept, params decoded', () => {
    const j = list.judge('GET', '/v1/./models/a%20b?x=1')
    expect(j.ok && { url: j.url, params: j.params }).toEqual({ url: '/v1/models/a%20b?x=1', params: { id: 'a b' } })
  })

  it('404 off the list, 405 with the allowed methods, 400 before either', () => {
    expect(list.judge('POST', '/v1/cache/rescan')).toMatchObject({ ok: false, status: 404 })
    expect(list.judge('GET', '/v1/models/x/y')).toMatchObject({ ok: false, status: 404 })
    expect(list.judge('DELETE', '/v1/models')).toMatchObject({ ok: false, status: 405, allow: ['GET', 'HEAD'] })
    expect(list.judge('POST', '/v1/models/../cache/rescan')).toMatchObject({ ok: false, status: 404 })
    expect(list.judge('POST', '/v1%2fcompletions')).toMatchObject({ ok: false, status: 400 })
  })

  it('routes are case-sensitive: another case is another path', () => {
    expect(list.judge('GET', '/V1/MODELS')).toMatchObject({ ok: false, status: 404 })
  })
})

// The one header copier of the front door's two proxies (pass-through and re-sent JSON).
import { describe, expect, it } from 'vitest'
import { HOP_BY_HOP, passHeaders } from '../../src/http/hop-by-hop.ts'

describe('passHeaders', () => {
  const from = {
    connection: 'keep-alive', 'keep-alive': 'timeout=5', 'transfer-encoding': 'chunked', upgrade: 'h2c', te: 'trailers', trailer: 'x',
    'proxy-authenticate': 'Basic', 'proxy-authorization': 'Basic abc',
    host: '127.0.0.1:1', 'content-length': '12', 'content-type': 'application/json', 'content-encoding': 'gzip',
    'x-request-id': 'r1', 'set-cookie': ['a=1', 'b=2'], absent: undefined,
  }

  it('drops every hop-by-hop header and nothing else unless asked', () => {
    expect([...HOP_BY_HOP].sort()).toEqual(['connection', 'keep-alive', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding', 'upgrade'])
    expect(passHeaders(from)).toEqual({
      host: '127.0.0.1:1', 'content-length': '12', 'content-type': 'application/json', 'content-encoding': 'gzip', 'x-request-id': 'r1', 'set-cookie': 'a=1, b=2',
    })
  })

  it('the pass-through drops host and length; the re-sent answer its length, encoding and type', () => {
    expect(passHeaders(from, ['host', 'content-length'])).toEqual({ 'content-type': 'application/json', 'content-encoding': 'gzip', 'x-request-id': 'r1', 'set-cookie': 'a=1, b=2' })
    expect(passHeaders(from, ['content-length', 'content-encoding', 'content-type'])).toEqual({ host: '127.0.0.1:1', 'x-request-id': 'r1', 'set-cookie': 'a=1, b=2' })
  })
})

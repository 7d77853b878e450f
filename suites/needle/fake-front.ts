// A stand-in OpenAI-compatible server for the run tests: it streams a fixed answer with a chosen
// pd_bridge verdict (or none, or an HTTP error) and counts the requests it got. The real front
// door is exercised by protocol-smoke.test.ts; this one isolates the run's own rules.
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'

/** What the stand-in answers. */
export interface FakeAnswer {
  text: string
  /** pd_bridge.verdict; undefined: no pd_bridge field and no header. */
  verdict?: string
  bridgedTokens?: number
  /** Answer with this HTTP status and an error body instead. */
  status?: number
}

/** A running stand-in. */
export interface FakeFront {
  url: string
  requests: Array<Record<string, unknown>>
  answer: FakeAnswer
  close: () => Promise<void>
}

/** Start a stand-in on a free port of 127.0.0.1. */
export async function startFakeFront (answer: FakeAnswer): Promise<FakeFront> {
  const requests: Array<Record<string, unknown>> = []
  const fake: FakeFront = { url: '', requests, answer, close: async () => {} }
  const server: Server = createServer((req, res) => {
    let body = ''
    req.on('data', (c: Buffer) => { body += c.toString('utf8') })
    req.on('end', () => {
      requests.push(JSON.parse(body) as Record<string, unknown>)
      const a = fake.answer
      if (a.status !== undefined) {
        res.writeHead(a.status, { 'content-type': 'application/json' })
        res.end(JSON.stringify({ error: { message: 'prompt too long', type: 'invalid_request_error' } }))
        return
      }
      const headers: Record<string, string> = { 'content-type': 'text/event-stream' }
      if (a.verdict !== undefined) headers['x-pd-bridge'] = a.verdict
      res.writeHead(200, headers)
      const send = (event: unknown): void => { res.write(`data: ${JSON.stringify(event)}\n\n`) }
      send({ choices: [{ index: 0, delta: { role: 'assistant', content: '' } }] })
      for (const piece of a.text.match(/.{1,3}/gs) ?? []) send({ choices: [{ index: 0, delta: { content: piece } }] })
      send({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })
      const last: Record<string, unknown> = { choices: [], usage: { prompt_tokens: 500, completion_tokens: 2, total_tokens: 502 } }
      if (a.verdict !== undefined) last.pd_bridge = { verdict: a.verdict, route: a.verdict === 'complete' || a.verdict.startsWith('partial') ? 'bridge' : 'native', bridged_tokens: a.bridgedTokens ?? 0 }
      send(last)
      res.end('data: [DONE]\n\n')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  fake.close = async () => await new Promise<void>((resolve) => server.close(() => resolve()))
  return fake
}

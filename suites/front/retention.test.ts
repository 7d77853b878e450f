// Capture retention on the real stack: once a bridge's blocks are written and verified, the front
// door deletes the capture through the engine's DELETE /v1/prefill/{id} (capture.retain none, the
// default; also without a share); capture.retain all keeps it; a failed bridge (a flipped layer
// byte) keeps its capture and the log says so; the front door's own spool is emptied either way.
import { existsSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { chatPrompt, frontConfig, makeArtifacts, startFaultProxy, startFront, startStack, tempDir, waitFor, type Artifacts, type FaultProxy, type Stack } from './stack.ts'
import { HANG_LIMIT_MS } from '../support/hang-limit.ts'

const tmp = tempDir('front-retention')
let art: Artifacts
let stack: Stack
let proxy: FaultProxy
const fronts: Record<string, Awaited<ReturnType<typeof startFront>>> = {}

beforeAll(async () => {
  art = await makeArtifacts(tmp.dir)
  stack = await startStack(tmp.dir, art)
  proxy = await startFaultProxy(() => stack.share.url)
  proxy.fault = 'flip-layer-byte'
  const spool = (name: string): Record<string, unknown> => ({ spoolDir: join(tmp.dir, `spool-${name}`) })
  const specs: Record<string, Record<string, unknown>> = {
    none: frontConfig(stack, { capture: spool('none') }),
    all: frontConfig(stack, { capture: { ...spool('all'), retain: 'all' } }),
    faulty: frontConfig(stack, { capture: spool('faulty') }, proxy.url),
    local: (() => { const x = frontConfig(stack); delete (x as { share?: unknown }).share; return { ...x, capture: { dir: stack.captureRoot } } })(),
  }
  for (const [name, f] of await Promise.all(Object.entries(specs).map(async ([name, spec]) => [name, await startFront(tmp.dir, name, spec)] as const))) fronts[name] = f
})

afterAll(async () => {
  await Promise.all(Object.values(fronts).map(async (f) => await f.stop()))
  await proxy?.close()
  await stack?.stop()
  tmp.remove()
})

async function bridge (front: string, seed: number): Promise<{ verdict: string, pd: Record<string, any> }> {
  const p = chatPrompt(art.tokenizer, seed, 700)
  const res = await fetch(`${fronts[front].url}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ messages: p.messages, max_tokens: 4, temperature: 0 }),
  })
  expect(res.status).toBe(200)
  return { verdict: res.headers.get('x-pd-bridge') ?? '', pd: ((await res.json()) as { pd_bridge: Record<string, any> }).pd_bridge }
}

const captured = (id: string): boolean => existsSync(join(stack.captureRoot, id))
// Request folders and in-flight marks: the spool's lock is the front door's own.
const spoolEntries = (name: string): string[] => readdirSync(join(tmp.dir, `spool-${name}`), { recursive: true, encoding: 'utf8' }).filter((n) => n !== '.pd-front.lock' && n !== '.inflight')

describe('capture.retain', () => {
  it('none (the default): a complete bridge deletes its capture on the prefill side and empties the spool', async () => {
    const a = await bridge('none', 501)
    expect(a.verdict).toBe('complete')
    expect(a.pd.capture).toMatchObject({ state: 'done', retention: 'deleted' })
    expect(captured(a.pd.capture.request_id)).toBe(false)
    expect(spoolEntries('none')).toEqual([])
    // The engine forgot it too: its status is a 404 now.
    expect((await fetch(`${stack.engine.url}/v1/prefill/${a.pd.capture.request_id}`)).status).toBe(404)
    expect(fronts.none.log().find((l) => l.event === 'bridge')).toMatchObject({ capture_retention: 'deleted' })
  })

  it('none, reading the capture root directly (no share): deleted through the engine as well', async () => {
    const a = await bridge('local', 502)
    expect(a.verdict).toBe('complete')
    expect(a.pd.capture.retention).toBe('deleted')
    expect(captured(a.pd.capture.request_id)).toBe(false)
  })

  it('all: the verified capture stays, whole', async () => {
    const a = await bridge('all', 503)
    expect(a.verdict).toBe('complete')
    expect(a.pd.capture.retention).toBe('kept: capture.retain is all')
    expect(existsSync(join(stack.captureRoot, a.pd.capture.request_id, 'manifest.json'))).toBe(true)
    expect(spoolEntries('all')).toEqual([])
  })

  it('a failed bridge (a flipped layer byte) keeps its capture, and the log names it', async () => {
    const a = await bridge('faulty', 504)
    expect(a.verdict).toMatch(/^declined: capture checksum mismatch: /)
    expect(a.pd.capture).toBeNull()
    const line = await waitFor(async () => fronts.faulty.log().find((l) => l.event === 'bridge-failed'), HANG_LIMIT_MS, 'the bridge-failed log line')
    expect(line.capture_kept).toMatch(/^pd-[0-9a-f-]+$/)
    // The engine finishes the capture it was asked for; nothing deletes it.
    await waitFor(async () => existsSync(join(stack.captureRoot, line.capture_kept, 'manifest.json')) ? true : undefined, HANG_LIMIT_MS, 'the kept capture')
    const status = await waitFor(async () => {
      const s = await (await fetch(`${stack.engine.url}/v1/prefill/${line.capture_kept}`)).json() as { state: string }
      return s.state === 'done' ? s : undefined
    }, HANG_LIMIT_MS, 'the capture sealed')
    expect(status.state).toBe('done')
    expect(captured(line.capture_kept)).toBe(true)
    expect(spoolEntries('faulty')).toEqual([])
  })
})

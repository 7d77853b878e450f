// Stalls and load on the real stack: a share or engine stopped with SIGSTOP (there, accepting
// connections, answering nothing) is noticed by the progress deadline, not the 30-minute totals;
// an engine that does not answer in time but accepts connections is busy, never "unreachable";
// only a killed one is. Every test waits on states (the engine's /health, the manifest on disk)
// and asserts verdicts and answers, never elapsed time.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { ChatMessage } from '../../src/model/tokenizer/index.ts'
import { chatPrompt, frontConfig, makeArtifacts, startFront, startStack, storeFiles, tempDir, waitFor, type Artifacts, type Proc, type Stack } from './stack.ts'
import { HANG_LIMIT_MS } from '../support/hang-limit.ts'

type Front = Awaited<ReturnType<typeof startFront>>

const tmp = tempDir('front-stall')
let art: Artifacts
let stack: Stack
const fronts: Record<string, Front> = {}
const MAX = 8

beforeAll(async () => {
  art = await makeArtifacts(tmp.dir)
  stack = await startStack(tmp.dir, art)
  const c = (deadlines: Record<string, unknown>): Record<string, unknown> => frontConfig(stack, { deadlines })
  const started = await Promise.all([
    // The share's stall deadline from the environment; the engine's kept long, so a slow chunk on a
    // loaded machine cannot be taken for a stall.
    startFront(tmp.dir, 'share-stall', c({ engineStallMs: 600_000 }), { PD_DEADLINE_STALL_MS: '1500' }).then((f) => ['shareStall', f] as const),
    startFront(tmp.dir, 'engine-stall', c({ stallMs: 1500 })).then((f) => ['engineStall', f] as const),
    startFront(tmp.dir, 'busy', c({ linkMs: 1000, submitMs: 1500 })).then((f) => ['busy', f] as const),
    startFront(tmp.dir, 'main', c({})).then((f) => ['main', f] as const),
  ])
  for (const [name, f] of started) fronts[name] = f
})

afterAll(async () => {
  for (const p of [stack?.engine, stack?.share]) if (p !== undefined && p.child.exitCode === null) p.child.kill('SIGCONT')
  await Promise.all(Object.values(fronts).map(async (f) => await f.stop()))
  await stack?.stop()
  tmp.remove()
})

interface Answer {
  verdict: string | null
  ids: number[]
  pd: Record<string, any>
}

async function chat (front: Proc, messages: ChatMessage[]): Promise<Answer> {
  const res = await fetch(`${front.url}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ messages, max_tokens: MAX, return_token_ids: true }),
  })
  expect(res.status).toBe(200)
  const d = await res.json() as { choices: Array<{ token_ids: number[] }>, pd_bridge: Record<string, any> }
  return { verdict: res.headers.get('x-pd-bridge'), ids: d.choices[0].token_ids, pd: d.pd_bridge }
}

/** The decoder alone: the reference decoder's greedy ids. */
async function reference (messages: ChatMessage[]): Promise<number[]> {
  const res = await fetch(`${stack.reference.url}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ messages, max_tokens: MAX, return_token_ids: true }),
  })
  return (await res.json() as { choices: Array<{ token_ids: number[] }> }).choices[0].token_ids
}

function manifestState (id: string): string | undefined {
  try {
    return (JSON.parse(readFileSync(join(stack.captureRoot, id, 'manifest.json'), 'utf8')) as { state: string }).state
  } catch {
    return undefined
  }
}

/**
 * Wait until the engine runs a capture whose manifest is on disk, then SIGSTOP the engine there:
 * the capture is then unsealed for sure, so no stream of it can have finished.
 */
async function stopEngineMidCapture (): Promise<string> {
  const id = await waitFor(async () => (await (await fetch(`${stack.engine.url}/health`)).json() as { running: string | null }).running ?? undefined, HANG_LIMIT_MS, 'the engine running the capture')
  await waitFor(async () => manifestState(id) !== undefined ? true : undefined, HANG_LIMIT_MS, 'the capture manifest written')
  stack.engine.child.kill('SIGSTOP')
  expect(manifestState(id)).toBe('running')
  return id
}

function expectStoreClean (): void {
  expect(storeFiles(stack.cacheDir).other).toEqual([])
}

describe('progress deadlines notice stalls', () => {
  it('a share stopped (SIGSTOP) mid-transfer: declined: share stalled; the native answer', async () => {
    const p = chatPrompt(art.tokenizer, 301, 2300)
    const pending = chat(fronts.shareStall, p.messages)
    let a: Answer
    try {
      await stopEngineMidCapture()
      stack.share.child.kill('SIGSTOP')
      stack.engine.child.kill('SIGCONT')
      a = await pending
    } finally {
      stack.engine.child.kill('SIGCONT')
      stack.share.child.kill('SIGCONT')
    }
    expect(a.verdict).toMatch(/^declined: share stalled: capture pd-[0-9a-f-]+: nothing from the share for 1500 ms \(/)
    expect(a.pd.bridged_tokens).toBe(0)
    expect(a.ids).toEqual(await reference(p.messages))
    expectStoreClean()
  })

  it('an engine stopped (SIGSTOP) mid-capture: declined: capture stalled, not unreachable', async () => {
    const p = chatPrompt(art.tokenizer, 302, 2300)
    const pending = chat(fronts.engineStall, p.messages)
    let a: Answer
    try {
      await stopEngineMidCapture()
      a = await pending
    } finally {
      stack.engine.child.kill('SIGCONT')
    }
    expect(a.verdict).toMatch(/^declined: capture stalled: the prefill engine's status of the request did not change for 1500 ms/)
    expect(a.ids).toEqual(await reference(p.messages))
    expectStoreClean()
  })
})

describe('busy is not dead', () => {
  it('an engine that accepts connections but does not answer in time: declined: prefill engine busy, never unreachable', async () => {
    // Let the previous test's capture finish first, so the engine is otherwise idle.
    await waitFor(async () => (await (await fetch(`${stack.engine.url}/health`)).json() as { running: string | null }).running === null ? true : undefined, HANG_LIMIT_MS, 'the engine idle')
    const p = chatPrompt(art.tokenizer, 303, 700)
    stack.engine.child.kill('SIGSTOP')
    let a: Answer
    let h: Record<string, any>
    try {
      a = await chat(fronts.busy, p.messages)
      h = await (await fetch(`${fronts.busy.url}/health`)).json() as Record<string, any>
    } finally {
      stack.engine.child.kill('SIGCONT')
    }
    expect(a.verdict).toMatch(/^declined: prefill engine busy: no answer to the submit within 1500 ms/)
    expect(a.verdict).not.toMatch(/unreachable/)
    expect(a.ids).toEqual(await reference(p.messages))
    expect(h.links.prefill).toMatchObject({ ok: false, busy: true })
    expect(h.bridge.problems).toEqual([])
  })

  it('a killed engine is unreachable; after a restart, bridging resumes', async () => {
    await stack.engine.stop('SIGKILL')
    const p = chatPrompt(art.tokenizer, 304, 700)
    const a = await chat(fronts.main, p.messages)
    expect(a.verdict).toBe(`declined: prefill engine unreachable: prefill engine (${stack.engine.url}/health): connection refused (is it running?)`)
    expect(a.ids).toEqual(await reference(p.messages))
    await stack.restartEngine()
    const q = chatPrompt(art.tokenizer, 305, 700)
    const b = await chat(fronts.main, q.messages)
    expect(b.verdict).toBe('complete')
    expect(b.ids).toEqual(await reference(q.messages))
    expectStoreClean()
  })
})

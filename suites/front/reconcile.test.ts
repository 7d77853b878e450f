// No leftovers after a kill, on the real stack: a process is SIGKILLed at a stage of a bridge (hit by
// watching the stage's own trace, never by sleeping: the engine's accepted count, its running
// request, the request folder in the spool), the stack is restarted, and nothing is left on disk
// but what retention keeps (a failed bridge's capture, sealed failed by the engine's recovery).
// - the front door at the submit/prefill stage and at the capture stream (a configured spool, and
//   a temporary one): the next front door removes the spool folders and retires the interrupted
//   bridges' captures on the engine (capture.retain none: deleted once sealed);
// - the prefill engine mid-prefill: its restart seals the capture failed (kept: the record of the
//   failed bridge), the front door answers natively and leaves no spool folder or mark.
import { existsSync, readdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { readManifest } from '../../src/wire/manifest.ts'
import { BLOCK, frontConfig, makeArtifacts, startFront, startStack, storeFiles, tempDir, textPrompt, waitFor, type Artifacts, type Stack } from './stack.ts'

let tmp: ReturnType<typeof tempDir>
let art: Artifacts
let stack: Stack
let seed = 38_400
const started: Array<{ stop: (s?: NodeJS.Signals) => Promise<number | null> }> = []

const visible = (dir: string): string[] => existsSync(dir) ? readdirSync(dir).filter((n) => !n.startsWith('.')) : []
const marks = (spool: string): string[] => existsSync(join(spool, '.inflight')) ? readdirSync(join(spool, '.inflight')) : []

async function engineHealth (): Promise<{ accepted_requests: number, running: string | null }> {
  return await (await fetch(`${stack.engine.url}/health`)).json() as { accepted_requests: number, running: string | null }
}

/** Send a fresh long cold prompt; the promise never rejects (a killed front door just ends it). */
function sendCold (url: string): Promise<{ status: number, verdict: string | null } | Error> {
  const { text } = textPrompt(art.tokenizer, seed++, 3 * BLOCK + 40)
  return fetch(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt: text, max_tokens: 4 }) })
    .then(async (r) => { await r.text(); return { status: r.status, verdict: r.headers.get('x-pd-bridge') } }, (e: unknown) => e as Error)
}

async function front (name: string, extra: Record<string, Record<string, unknown>> = {}): Promise<Awaited<ReturnType<typeof startFront>>> {
  const f = await startFront(tmp.dir, name, frontConfig(stack, { deadlines: { pollMs: 50, engineDownPolls: 6, linkMs: 2000, captureMs: 120_000 }, ...extra }))
  started.push(f)
  return f
}

beforeAll(async () => {
  tmp = tempDir('reconcile')
  art = await makeArtifacts(tmp.dir)
  stack = await startStack(tmp.dir, art)
})

afterAll(async () => {
  await Promise.all(started.map(async (p) => await p.stop().catch(() => null)))
  await stack?.stop()
  tmp?.remove()
})

/** Every capture of the engine is gone (retired), whatever else was kept. */
async function capturesRetired (): Promise<void> {
  await waitFor(async () => visible(stack.captureRoot).length === 0 ? true : undefined, 120_000, 'the interrupted captures to be retired')
}

describe('a front door killed mid-bridge leaves nothing the next one does not reconcile', () => {
  const spool = (): string => join(tmp.dir, 'spool')

  it('killed at the capture stream (configured spool): the next front door removes the folder and retires the capture', async () => {
    const a = await front('front-a', { capture: { spoolDir: spool() } })
    const pending = sendCold(a.url)
    const [folder] = await waitFor(async () => { const v = visible(spool()); return v.length > 0 ? v : undefined }, 120_000, 'a request folder in the spool')
    await a.stop('SIGKILL')
    expect(await pending).toBeInstanceOf(Error)
    expect(marks(spool())).toEqual([folder])

    const b = await front('front-b', { capture: { spoolDir: spool() } })
    const line = b.log().find((l) => l.event === 'reconciled')
    expect(line).toMatchObject({ spool_removed: 1, interrupted: [folder] })
    expect(line?.spool_bytes).toBeGreaterThanOrEqual(0)
    expect(visible(spool())).toEqual([])
    expect(marks(spool())).toEqual([])
    await capturesRetired()
    await waitFor(async () => b.log().find((l) => l.event === 'interrupted-capture' && l.request_id === folder), 30_000, 'the retirement log line')
    expect(b.log().find((l) => l.event === 'interrupted-capture')?.retention).toBe('deleted')
    await b.stop()
  })

  it('killed right after the engine accepted the submit (prefill stage): the capture is retired once sealed', async () => {
    const before = (await engineHealth()).accepted_requests
    const a = await front('front-c', { capture: { spoolDir: spool() } })
    const pending = sendCold(a.url)
    await waitFor(async () => (await engineHealth()).accepted_requests > before ? true : undefined, 120_000, 'the engine to accept the submit')
    await a.stop('SIGKILL')
    await pending
    const [mark] = marks(spool())
    expect(mark).toMatch(/^pd-/)
    const b = await front('front-d', { capture: { spoolDir: spool() } })
    expect(b.log().find((l) => l.event === 'reconciled')).toMatchObject({ interrupted: [mark] })
    expect(visible(spool())).toEqual([])
    await capturesRetired()
    await b.stop()
  })

  it('killed at the capture stream (temporary spool): the dead front door\'s temporary spool goes', async () => {
    const a = await front('front-e')
    const prefix = `pd-bridge-front-spool-${a.child.pid}-`
    const own = (): string | undefined => readdirSync(tmpdir()).find((n) => n.startsWith(prefix))
    const pending = sendCold(a.url)
    await waitFor(async () => { const d = own(); return d !== undefined && visible(join(tmpdir(), d)).length > 0 ? true : undefined }, 120_000, 'a request folder in the temporary spool')
    await a.stop('SIGKILL')
    await pending
    expect(own()).toBeDefined()
    const b = await front('front-f')
    expect(own()).toBeUndefined()
    expect(b.log().find((l) => l.event === 'reconciled')?.temp_spools_removed).toBeGreaterThanOrEqual(1)
    await capturesRetired()
    await b.stop()
  })
})

describe('the prefill engine killed mid-prefill', () => {
  it('its restart seals the capture failed (kept: a failed bridge\'s record); the answer is native; no spool folder, no mark, no stray file in the store', async () => {
    const spool = join(tmp.dir, 'spool-engine')
    const f = await front('front-g', { capture: { spoolDir: spool } })
    const pending = sendCold(f.url)
    const id = await waitFor(async () => (await engineHealth()).running ?? undefined, 120_000, 'the engine to run the request')
    // Mid-prefill: the capture's manifest is in place and says running.
    await waitFor(async () => (await readManifest(join(stack.captureRoot, id)).catch(() => undefined))?.state === 'running' ? true : undefined, 120_000, 'the running manifest')
    await stack.restartEngine()
    const answer = await pending
    expect(answer).not.toBeInstanceOf(Error)
    expect((answer as { status: number }).status).toBe(200)
    expect((answer as { verdict: string }).verdict).toMatch(/^declined: /)
    expect(visible(stack.captureRoot)).toEqual([id])
    expect((await readManifest(join(stack.captureRoot, id))).state).toBe('failed')
    expect(visible(spool)).toEqual([])
    expect(marks(spool)).toEqual([])
    expect(storeFiles(stack.cacheDir).other).toEqual([])
    await f.stop()
  })
})

// No leftovers after a kill, on the real stack: a process is SIGKILLed at a stage of a bridge (hit by
// watching the stage's own trace, never by sleeping: the engine's accepted count, its running
// request, the request folder in the spool), the stack is restarted, and nothing is left on disk
// but what retention keeps (a failed bridge's capture, sealed failed by the engine's recovery).
// - the front door at the submit/prefill stage and at the capture stream (a configured spool, and
//   a temporary one): the next front door removes the spool folders and retires the interrupted
//   bridges' captures on the engine (capture.retain none: deleted once sealed);
// - the prefill engine mid-prefill: its restart seals the capture failed (kept: the record of the
//   failed bridge), the front door answers natively and leaves no spool folder or mark.
// Then a table of (process, stage): the front door, the prefill engine, the share and the decoder,
// each killed at each stage of a bridge it takes part in (submit/prefill, capture stream, block
// write with a `.partial-` file in the store, rescan) and started again (docs/front-door.md, *No
// leftovers*).
import { existsSync, readdirSync, readFileSync, watch, type FSWatcher } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { readManifest } from '../../src/wire/manifest.ts'
import { HANG_LIMIT_MS } from '../support/hang-limit.ts'
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

// The table: each process of a bridge SIGKILLed at each stage it takes part in, hit by watching
// the stage's own trace, then started again (for the front door: a new one on the same spool);
// then nothing is left on disk but what retention keeps, and the next cold prompt answers as the
// decoder alone does.
type Process = 'front door' | 'prefill engine' | 'share' | 'decoder'
type Stage = 'submit/prefill' | 'capture stream' | 'block write' | 'rescan'
const CASES: Array<[Process, Stage]> = [
  ['front door', 'block write'], ['front door', 'rescan'],
  ['prefill engine', 'capture stream'], ['prefill engine', 'block write'], ['prefill engine', 'rescan'],
  ['share', 'submit/prefill'], ['share', 'capture stream'], ['share', 'block write'], ['share', 'rescan'],
  ['decoder', 'submit/prefill'], ['decoder', 'capture stream'], ['decoder', 'block write'], ['decoder', 'rescan'],
]

describe('each process SIGKILLed at each stage of a bridge, then started again', () => {
  const spool = (): string => join(tmp.dir, 'spool-stages')
  const fronts: Array<Awaited<ReturnType<typeof front>>> = []
  let current: Awaited<ReturnType<typeof front>>
  const decoderLog = (): string => join(tmp.dir, 'decoder.log')
  const rescans = (): number => existsSync(decoderLog()) ? readFileSync(decoderLog(), 'utf8').split('\n').filter((l) => l.includes('"event":"rescan"')).length : 0

  beforeAll(async () => {
    current = await front('front-stages-0', { capture: { spoolDir: spool() } })
    fronts.push(current)
  })

  /** Signal `pid`, which may be gone already. */
  const signal = (pid: number, sig: NodeJS.Signals): void => {
    try {
      process.kill(pid, sig)
    } catch { /* gone */ }
  }

  // A case that failed between its SIGSTOP and SIGCONT leaves no front door stopped for the stop at the end.
  afterAll(() => { for (const f of fronts) if (f.child.pid !== undefined) signal(f.child.pid, 'SIGCONT') })

  /** The decoder alone's greedy ids for `prompt`, and the same prompt through `url`. */
  async function ids (url: string, prompt: string): Promise<{ status: number, ids: number[] | undefined, verdict: string | null }> {
    const res = await fetch(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt, max_tokens: 4, temperature: 0, return_token_ids: true }) })
    const body = await res.json() as { choices?: Array<{ token_ids: number[] }> }
    return { status: res.status, ids: body.choices?.[0]?.token_ids, verdict: res.headers.get('x-pd-bridge') }
  }

  /**
   * Freeze the front door (the block writer) with SIGSTOP the moment a block file of the store is
   * half written (a `.partial-` file seen and still there once it is stopped, as protocols/faults.mjs
   * 'writer-sigkill' does); after a few misses, the next stop (between blocks) is taken. Resolves with
   * what was caught, the writer still stopped: the caller SIGCONTs it (or kills it).
   */
  function writerFrozen (pid: number): { caught: Promise<string | null>, close: () => void } {
    const watchers: FSWatcher[] = []
    let stops = 0
    let done = false
    const caught = new Promise<string | null>((resolve) => {
      for (const sub of '0123456789abcdef') {
        watchers.push(watch(join(stack.cacheDir, sub), (_type, file) => {
          if (done || typeof file !== 'string' || !file.includes('.partial-')) return
          signal(pid, 'SIGSTOP')
          stops++
          const partial = readdirSync(join(stack.cacheDir, sub)).find((n) => n.includes('.partial-'))
          if (partial !== undefined || stops >= 8) {
            done = true
            resolve(partial ?? null)
          } else signal(pid, 'SIGCONT')
        }))
      }
    })
    return { caught, close: () => { for (const w of watchers) w.close() } }
  }

  async function kill (p: Process): Promise<void> {
    if (p === 'front door') await current.stop('SIGKILL')
    else if (p === 'prefill engine') await stack.engine.stop('SIGKILL')
    else if (p === 'share') await stack.share.stop('SIGKILL')
    else await stack.decoder.stop('SIGKILL')
  }

  async function restart (p: Process): Promise<void> {
    if (p === 'front door') {
      current = await front(`front-stages-${fronts.length}`, { capture: { spoolDir: spool() } })
      fronts.push(current)
    } else if (p === 'prefill engine') await stack.restartEngine()
    else if (p === 'share') await stack.restartShare('SIGKILL')
    else await stack.restartDecoder('SIGKILL')
  }

  /** The ids the front doors said what became of: retired, deleted, or kept as a failed bridge's record. */
  function outcomes (): { kept: Set<string>, settled: Set<string> } {
    const kept = new Set<string>()
    const settled = new Set<string>()
    for (const f of fronts) {
      for (const l of f.log()) {
        if (l.event === 'bridge-failed' && typeof l.capture_kept === 'string') { kept.add(l.capture_kept); settled.add(l.capture_kept) }
        // A delete that did not reach the engine (killed) is retried: settled by its `capture-retired` line.
        if (l.event === 'bridge' && typeof l.request_id === 'string' && typeof l.capture_retention === 'string' && !l.capture_retention.startsWith('kept: the delete failed')) settled.add(l.request_id)
        if ((l.event === 'interrupted-capture' || l.event === 'capture-retired') && typeof l.request_id === 'string') settled.add(l.request_id)
      }
    }
    return { kept, settled }
  }

  /** Nothing on disk but what retention keeps: failed captures and failed bridges' captures. */
  async function nothingLeft (): Promise<void> {
    const captures = await waitFor(async () => {
      const { settled } = outcomes()
      const states = await Promise.all(visible(stack.captureRoot).map(async (id) => ({ id, state: (await readManifest(join(stack.captureRoot, id)).catch(() => undefined))?.state })))
      // A mark outlives its capture by a moment (a capture retired later: the delete, then the mark).
      const sealed = states.every((c) => c.state === 'failed' || (c.state !== 'running' && c.state !== undefined && settled.has(c.id)))
      return sealed && marks(spool()).every((id) => settled.has(id)) ? states : undefined
    }, HANG_LIMIT_MS, 'every capture to be sealed and its bridge settled')
    const { kept } = outcomes()
    for (const c of captures) expect(c.state === 'failed' || kept.has(c.id), `capture ${c.id} (${c.state}) belongs to no live request and no failed bridge`).toBe(true)
    expect(visible(spool())).toEqual([])
    expect(marks(spool())).toEqual([])
    expect(storeFiles(stack.cacheDir).other).toEqual([])
    const scan = await (await fetch(`${stack.decoder.url}/v1/cache/rescan`, { method: 'POST' })).json() as { report: Record<string, unknown> }
    expect(scan.report).toMatchObject({ unreadable: 0, refused: {}, tempKept: 0 })
  }

  for (const [proc, stage] of CASES) {
    it(`${proc} killed at the ${stage} stage`, async () => {
      const { text } = textPrompt(art.tokenizer, seed++, 6 * BLOCK + 40)
      const rescansBefore = rescans()
      const frozen = stage === 'block write' ? writerFrozen(current.child.pid as number) : undefined
      const frontPid = current.child.pid as number
      const pending = ids(current.url, text).catch((e: unknown) => e as Error)
      let partial: string | null = null
      if (stage === 'submit/prefill') await waitFor(async () => (await engineHealth()).running ?? undefined, HANG_LIMIT_MS, 'the engine to run the request')
      else if (stage === 'capture stream') await waitFor(async () => visible(spool()).some((d) => visible(join(spool(), d)).length > 0) ? true : undefined, HANG_LIMIT_MS, 'a layer file in the spool')
      else if (stage === 'rescan') {
        await waitFor(async () => rescans() > rescansBefore ? true : undefined, HANG_LIMIT_MS, 'the decoder to rescan')
        // Held there while the other process dies (the retention's delete comes next).
        if (proc !== 'front door') signal(frontPid, 'SIGSTOP')
      }
      else {
        const caught = await Promise.race([frozen!.caught, pending.then(() => 'ended' as const)])
        frozen!.close()
        expect(caught, 'the writer was never caught writing a block').not.toBe('ended')
        partial = caught as string | null
        // Which moment was caught: a block half written, or (after a few misses) between blocks.
        console.log(`${proc} killed at the block write stage: ${partial === null ? 'between blocks' : `with ${partial} half written`}`)
      }
      frozen?.close()
      await kill(proc)
      if ((frozen !== undefined || stage === 'rescan') && proc !== 'front door') signal(frontPid, 'SIGCONT')
      await restart(proc)
      await pending
      // A block the dead front door was writing: its temporary file goes at the next one's start, counted.
      if (proc === 'front door' && partial !== null) expect(current.log().find((l) => l.event === 'reconciled')?.store_temps_removed).toBeGreaterThanOrEqual(1)
      await nothingLeft()
      // The next cold prompt answers as the decoder alone does.
      const next = textPrompt(art.tokenizer, seed++, 3 * BLOCK + 40).text
      const [alone, bridged] = [await ids(stack.reference.url, next), await ids(current.url, next)]
      expect(bridged.status).toBe(200)
      expect(bridged.ids).toEqual(alone.ids)
      await nothingLeft()
    }, HANG_LIMIT_MS)
  }
})

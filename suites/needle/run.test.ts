import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ConfigError, PdBridgeError } from '../../src/errors.ts'
import { SeedLedger } from '../../verify/needle/seed-ledger.ts'
import { buildNeedleDocument, type NeedleDocument } from '../../verify/needle/document.ts'
import { geometryFromFlag, type DeploymentGeometry } from '../../verify/needle/geometry.ts'
import { readNeedleRecords } from '../../verify/needle/record.ts'
import { answerBudget, runNeedle, writeNeedleRecord, type NeedleRunOptions } from '../../verify/needle/run.ts'
import type { RunEnvironment } from '../../verify/results/record.ts'
import { startFakeFront, type FakeFront } from './fake-front.ts'
import { tinyTokenizer } from './helpers.ts'

const ENV: RunEnvironment = { id: 'env-test', cpu: 'test cpu', cores: 2, memoryBytes: 1, node: 'v20', os: 'linux', commit: 'abc', configFingerprint: 'cfg', model: 'test model' }
const NEW = geometryFromFlag('yarn factor 32')
const OLD = geometryFromFlag('yarn factor 16 (stale)')

let dir: string
let front: FakeFront
let native: FakeFront

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'pd-needle-run-'))
  front = await startFakeFront({ text: ' amber', verdict: 'complete', bridgedTokens: 1024 })
  native = await startFakeFront({ text: ' amber' })
})
afterAll(async () => {
  await front.close()
  await native.close()
  await rm(dir, { recursive: true, force: true })
})

function doc (seed: number, tokenizer = true): NeedleDocument {
  return buildNeedleDocument({ seed, targetTokens: 1536, needles: [{ key: 0, value: ' amber', depth: 0.5 }], ask: 0, ...(tokenizer ? { tokenizer: tinyTokenizer() } : {}) })
}

function options (document: NeedleDocument, ledger: SeedLedger, geometry: DeploymentGeometry): NeedleRunOptions {
  return {
    document, cell: { targetTokens: 1536, depth: 0.5, repeat: 0 }, invocationSeed: 1, environment: ENV, model: 'm',
    frontUrl: front.url, nativeUrl: native.url, budget: answerBudget(), ledger, geometry, blockSize: 256, legTimeoutMs: 10_000,
    now: () => new Date('2026-01-02T03:04:05.678Z'),
  }
}

describe('the seed ledger guards every run (the reused-seed trap)', () => {
  it('a fresh document runs both legs and is recorded under the geometry', async () => {
    const file = join(dir, 'fresh.json')
    const ledger = await SeedLedger.open(file)
    const r = await runNeedle(options(doc(1), ledger, NEW))
    expect(r.ledger).toEqual({ file, unit: 'tokens', outcome: 'fresh', reuses: [], recorded: true })
    expect(r.refused).toBeNull()
    expect(r.bridged?.outcome).toBe('pass')
    expect(r.native?.outcome).toBe('pass')
    const reopened = await SeedLedger.open(file)
    expect(reopened.entries).toHaveLength(1)
    expect(reopened.entries[0].geometry).toBe(NEW.fingerprint)
    expect(reopened.entries[0].label).toBe('needle seed 1 (1536 tokens, depth 0.5, invocation 1)')
  })

  it('the same seed after a geometry change is refused before any request, and recorded as such', async () => {
    const file = join(dir, 'change.json')
    const ledger = await SeedLedger.open(file)
    await runNeedle(options(doc(2), ledger, OLD))
    const before = front.requests.length + native.requests.length
    const r = await runNeedle(options(doc(2), ledger, NEW))
    expect(front.requests.length + native.requests.length).toBe(before)
    expect(r.ledger.outcome).toBe('reused-seed')
    expect(r.ledger.recorded).toBe(false)
    expect(r.ledger.reuses).toEqual([{ label: 'needle seed 2 (1536 tokens, depth 0.5, invocation 1)', geometry: OLD.fingerprint, sharedBlocks: 5, sameGeometry: false }])
    expect(r.refused).toMatch(/^reused seed: the document shares its first 5 block\(s\) with "needle seed 2 .*", cached under another geometry [0-9a-f]{16}; .* use a fresh seed$/)
    expect(r.bridged).toBeNull()
    expect(r.native).toBeNull()
    expect((await SeedLedger.open(file)).entries).toHaveLength(1)
  })

  it('the same seed under the same geometry runs (its blocks are this geometry\'s), flagged as a reuse', async () => {
    const file = join(dir, 'same.json')
    const ledger = await SeedLedger.open(file)
    await runNeedle(options(doc(3), ledger, NEW))
    const before = front.requests.length
    const r = await runNeedle(options(doc(3), ledger, NEW))
    expect(front.requests.length).toBe(before + 1)
    expect(r.ledger.outcome).toBe('reused-same-geometry')
    expect(r.ledger.reuses.map((x) => x.sameGeometry)).toEqual([true])
    expect(r.refused).toBeNull()
  })

  it('a fresh seed after the change runs', async () => {
    const file = join(dir, 'after.json')
    const ledger = await SeedLedger.open(file)
    await runNeedle(options(doc(4), ledger, OLD))
    const r = await runNeedle(options(doc(5), ledger, NEW))
    expect(r.ledger.outcome).toBe('fresh')
    expect(r.bridged?.outcome).toBe('pass')
  })

  it('without a tokenizer the ledger hashes the content bytes, and still refuses the reused seed', async () => {
    const ledger = await SeedLedger.open(join(dir, 'bytes.json'))
    const first = await runNeedle(options(doc(6, false), ledger, OLD))
    expect(first.ledger.unit).toBe('bytes')
    expect(ledger.entries[0].blockSize).toBe(1024)
    const again = await runNeedle(options(doc(6, false), ledger, NEW))
    expect(again.ledger.outcome).toBe('reused-seed')
    expect(again.bridged).toBeNull()
  })
})

describe('what a run records', () => {
  it('the request is streamed, greedy, with the answer budget; the record round-trips through its file', async () => {
    const ledger = await SeedLedger.open(join(dir, 'record.json'))
    const d = doc(7)
    const r = await runNeedle(options(d, ledger, NEW))
    const sent = front.requests[front.requests.length - 1]
    expect(sent).toEqual({ model: 'm', messages: d.messages, max_tokens: 300, temperature: 0, stream: true, stream_options: { include_usage: true } })
    expect(native.requests[native.requests.length - 1]).toEqual(sent)
    expect(r.answerBudget).toEqual({ maxTokens: 300, belowMinimum: false })
    expect(r.bridged).toMatchObject({ verdict: 'complete', verdictKind: 'complete', route: 'bridge', bridgedTokens: 1024, promptTokens: 500, completionTokens: 2, finishReason: 'stop', answer: ' amber', hit: true, outcome: 'pass' })
    expect(r.needles).toEqual(d.needles)
    expect(r.expected).toBe('amber')
    expect(r.runId).toBe(`2026-01-02T03-04-05-678Z-1536-d0.5-r0-7`)
    const out = join(dir, 'runs')
    const file = await writeNeedleRecord(out, r)
    expect(file).toBe(join(out, `${r.runId}.json`))
    expect(await readNeedleRecords(out)).toEqual([r])
    expect(JSON.parse(await readFile(file, 'utf8'))).toEqual(r)
  })

  it('a partial or declined verdict is recorded with its hit and never as a bridged pass', async () => {
    const ledger = await SeedLedger.open(join(dir, 'verdicts.json'))
    for (const [i, verdict] of ['partial 512/1530', 'declined: bridge queue full (1 waiting behind the running bridge)'].entries()) {
      front.answer = { text: 'Amber.', verdict }
      const r = await runNeedle(options(doc(20 + i), ledger, NEW))
      expect(r.bridged).toMatchObject({ verdict, hit: true, outcome: 'not-bridged' })
    }
    front.answer = { text: ' amber' }
    const none = await runNeedle(options(doc(22), ledger, NEW))
    expect(none.bridged).toMatchObject({ verdict: 'declined: no verdict in the response', verdictKind: 'declined', route: 'unknown', outcome: 'not-bridged' })
    front.answer = { text: ' amber', verdict: 'complete', bridgedTokens: 1024 }
  })

  it('an HTTP error stops the run with the URL and the status named', async () => {
    const ledger = await SeedLedger.open(join(dir, 'error.json'))
    native.answer = { text: '', status: 400 }
    const e = await runNeedle(options(doc(30), ledger, NEW)).catch((x: unknown) => x)
    native.answer = { text: ' amber' }
    expect(e).toBeInstanceOf(PdBridgeError)
    expect((e as Error).message).toBe(`native leg: ${native.url}/v1/chat/completions answered HTTP 400: {"error":{"message":"prompt too long","type":"invalid_request_error"}}`)
  })

  it('only a leg with a URL runs; a run with neither is a ConfigError', async () => {
    const ledger = await SeedLedger.open(join(dir, 'legs.json'))
    const r = await runNeedle({ ...options(doc(40), ledger, NEW), frontUrl: undefined })
    expect(r.bridged).toBeNull()
    expect(r.native?.outcome).toBe('pass')
    await expect(runNeedle({ ...options(doc(41), ledger, NEW), frontUrl: undefined, nativeUrl: undefined })).rejects.toThrow(ConfigError)
  })
})

describe('the answer budget', () => {
  it('defaults to 300 and refuses less than 256 unless the user insists', () => {
    expect(answerBudget()).toEqual({ maxTokens: 300, belowMinimum: false })
    expect(answerBudget(256)).toEqual({ maxTokens: 256, belowMinimum: false })
    expect(() => answerBudget(255)).toThrow('--max-tokens: 255 is below the 256-token minimum answer budget')
    expect(answerBudget(32, true)).toEqual({ maxTokens: 32, belowMinimum: true })
    expect(() => answerBudget(0, true)).toThrow(ConfigError)
  })
})

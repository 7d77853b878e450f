// The needle law from run records (--needle-record): a record counts only when it parses, carries
// the gate's own geometry key (decoder store + sidecar), has exact positions, a fresh seed, the asked
// needle past the native window and inside the bridged tokens, a `complete` verdict and a hit. Each
// way a record falls short is named in the finding; the ledger check uses the same key.
import { mkdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { runGate, SeedLedger, type GateReport, type NeedleGeometry } from '../../verify/gate/index.ts'
import type { NeedleRunRecord } from '../../verify/needle/record.ts'
import { makeDeployment, type Deployment } from './helpers.ts'
import { deploymentNeedleGeometry, needleRecord } from './needle-records.ts'

let d: Deployment
let g: NeedleGeometry
let n = 0

beforeAll(async () => {
  d = await makeDeployment('needle-records')
  g = deploymentNeedleGeometry(d.decoderConfig, d.sidecarDir)!
})
afterAll(async () => await d.cleanup())

async function recordFile (r: NeedleRunRecord | string, dir = join(d.root, 'records')): Promise<string> {
  await mkdir(dir, { recursive: true })
  const file = join(dir, `run-${n++}.json`)
  await writeFile(file, typeof r === 'string' ? r : JSON.stringify(r, null, 2))
  return file
}

async function gateWith (...files: string[]): Promise<GateReport> {
  return await runGate(d.options({ needleRecords: files }))
}

function needle (r: GateReport): Array<[string, string | undefined, string]> {
  return r.findings.filter((f) => f.check === 'needle').map((f) => [f.status, f.file, f.message])
}

const RUN = 'seed 4242, 1,790-token prompt, the asked needle "amber" at position 1,533'

describe('a passing record', () => {
  it('is accepted: the gate passes, and the finding says what was shown', async () => {
    const file = await recordFile(needleRecord(g))
    const r = await gateWith(file)
    expect(r.verdict.pass).toBe(true)
    expect(needle(r)).toEqual([['pass', file, `bridged pass above the native window: ${RUN}, past the native window 1,024 and inside the 1,536 bridged tokens: verdict complete, answered " amber"; fresh seed (ledger /srv/pd/needle-ledger.json); native leg: pass (answered " amber")`]])
    expect(r.needle.map((x) => x.status)).toEqual(['pass'])
    expect(r.needleGeometry).toEqual(g)
  })
})

describe('a record that is not a bridged pass above the native window', () => {
  const cases: Array<[string, (r: NeedleRunRecord) => void, string]> = [
    ['declined', (r) => {
      r.bridged = { ...r.bridged!, verdict: 'declined: geometry mismatch: block writer: the capture\'s sidecar (profile decoder) gives geometry 0123, the store\'s is 4567', verdictKind: 'declined', route: 'native', bridgedTokens: 0, outcome: 'not-bridged' }
    }, `not a bridged pass above the native window: ${RUN}: not bridged, verdict "declined: geometry mismatch: block writer: the capture's sidecar (profile decoder) gives geometry 0123, the store's is 4567"; the decoder prefilled the prompt itself and answered " amber", which is never a bridged pass; native leg: pass (answered " amber")`],
    ['partial', (r) => {
      r.bridged = { ...r.bridged!, verdict: 'partial 1024/1790', verdictKind: 'partial', bridgedTokens: 1024, outcome: 'not-bridged' }
    }, `not a bridged pass above the native window: ${RUN}: bridged only in part, verdict "partial 1024/1790"; the decoder prefilled the rest itself, which is never a bridged pass; native leg: pass (answered " amber")`],
    ['a miss', (r) => {
      r.bridged = { ...r.bridged!, answer: ' unknown', hit: false, outcome: 'miss' }
    }, `not a bridged pass above the native window: ${RUN}: MISS through the bridge (verdict complete, 1,536 tokens bridged): answered " unknown", expected "amber"; native leg: pass (answered " amber")`],
    ['a needle inside the native window', (r) => {
      r.needles = [{ ...r.needles[0], depth: 0.5, position: 900, distance: 890 }]
    }, 'no evidence for the needle law: seed 4242, 1,790-token prompt, the asked needle "amber" at position 900: the needle is inside the native window (positions 0..1,023, original_max_position_embeddings 1,024), so it does not test the window change; native leg: pass (answered " amber")'],
    ['a needle past the bridged tokens', (r) => {
      r.bridged = { ...r.bridged!, bridgedTokens: 1280 }
    }, `no evidence for the needle law: ${RUN}: past the 1,280 bridged tokens, so the decoder, not the bridge, computed the cache entries that carry it; native leg: pass (answered " amber")`],
    ['estimated positions', (r) => {
      r.document = { ...r.document, positions: 'approximate', charsPerToken: 4 }
    }, `no evidence for the needle law: ${RUN}: positions are estimated (the protocol ran without --tokenizer), so whether the needle sat past the native window is not known; re-run with the deployment's tokenizer; native leg: pass (answered " amber")`],
    ['no bridged leg', (r) => {
      r.bridged = null
    }, `not a bridged pass above the native window: ${RUN}: no bridged leg (only the decoder alone was asked), so nothing went through the bridge; native leg: pass (answered " amber")`],
    ['a reused seed (refused)', (r) => {
      r.ledger = { ...r.ledger, outcome: 'reused-seed', recorded: false, reuses: [{ label: 'needle seed 4242 (1792 tokens, depth 1, invocation 4242)', geometry: 'b'.repeat(64), sharedBlocks: 6, sameGeometry: false }] }
      r.refused = 'reused seed: ...'
      r.bridged = null
      r.native = null
    }, `not a bridged pass above the native window: reused seed 4242: the document shares its first 6 block(s) with "needle seed 4242 (1792 tokens, depth 1, invocation 4242)", cached under another geometry bbbbbbbbbbbbbbbb; the decoder could serve those blocks from the old geometry, so the run was refused and proves nothing; use a fresh seed; native leg: not run`],
    ['a seed reused under the same geometry', (r) => {
      r.ledger = { ...r.ledger, outcome: 'reused-same-geometry', reuses: [{ label: 'needle seed 4242', geometry: g.key, sharedBlocks: 6, sameGeometry: true }] }
    }, 'not a bridged pass above the native window: not a fresh seed: seed 4242\'s document shares its first 6 block(s) with "needle seed 4242" under this geometry, so those tokens came from the decoder\'s cache, not from this run\'s bridge; use a fresh seed; native leg: pass (answered " amber")'],
  ]
  for (const [what, change, message] of cases) {
    it(`${what}: rejected, with the reason`, async () => {
      const file = await recordFile(needleRecord(g, change))
      const r = await gateWith(file)
      expect(needle(r)).toEqual([['fail', file, message]])
      expect(r.findings.filter((f) => f.status === 'fail').map((f) => f.check)).toEqual(['needle'])
      expect(r.verdict.pass).toBe(false)
    })
  }

  it('another geometry key (a run before the fix): rejected, naming both keys', async () => {
    const stale = needleRecord({ key: 'c'.repeat(64), store: g.store, sidecar: 'd'.repeat(64) })
    const file = await recordFile(stale)
    const r = await gateWith(file)
    expect(needle(r)).toEqual([['fail', file, `no evidence for the needle law: ${RUN}: recorded under geometry cccccccccccccccc (store ${g.store.slice(0, 16)}, sidecar dddddddddddddddd), not this deployment's ${g.key.slice(0, 16)} (store ${g.store.slice(0, 16)}, sidecar ${g.sidecar.slice(0, 16)}): a run made under another geometry (before a fix) never counts; native leg: pass (answered " amber")`]])
  })
})

describe('a directory of records', () => {
  it('passes with one pass; runs that are no evidence are warnings beside it, never passes', async () => {
    const dir = join(d.root, 'dir-ok')
    await recordFile(needleRecord(g), dir)
    await recordFile(needleRecord(g, (r) => { r.needles = [{ ...r.needles[0], position: 300, distance: 1490 }] }), dir)
    await recordFile(needleRecord({ ...g, key: 'e'.repeat(64) }), dir)
    const r = await gateWith(dir)
    expect(needle(r).map(([s]) => s)).toEqual(['pass', 'warn', 'warn'])
    expect(r.verdict.pass).toBe(true)
  })

  it('fails when any run under this geometry failed through the bridge, whatever else passed', async () => {
    const dir = join(d.root, 'dir-miss')
    await recordFile(needleRecord(g), dir)
    await recordFile(needleRecord(g, (r) => { r.bridged = { ...r.bridged!, answer: ' teal', hit: false, outcome: 'miss' } }), dir)
    const r = await gateWith(dir)
    expect(needle(r).map(([s]) => s)).toEqual(['pass', 'fail'])
    expect(r.verdict.pass).toBe(false)
  })

  it('names a file that is not a record, a path that does not exist and an empty directory; the rest is still judged', async () => {
    const dir = join(d.root, 'dir-bad')
    const good = await recordFile(needleRecord(g), dir)
    const bad = await recordFile(JSON.stringify({ ...needleRecord(g), schema: 'pd-bridge/needle-run@0' }), dir)
    const broken = await recordFile('{"schema": ', dir)
    const empty = join(d.root, 'dir-empty')
    await mkdir(empty)
    const missing = join(d.root, 'no-such-record.json')
    const r = await gateWith(dir, empty, missing)
    expect(needle(r).map(([s, file]) => [s, file])).toEqual([
      ['pass', good], ['fail', bad], ['fail', broken], ['fail', empty], ['fail', missing],
    ])
    const messages = needle(r).map(([, , m]) => m)
    expect(messages[1]).toBe('not a needle record: needle record field schema: Invalid input: expected "pd-bridge/needle-run@1"')
    expect(messages[2]).toMatch(/^not a needle record: not JSON: /)
    expect(messages[3]).toBe('not a needle record: holds no *.json needle records')
    expect(messages[4]).toBe('not a needle record: cannot be read: ENOENT')
  })
})

describe('the gate\'s ledger check', () => {
  it('files documents under the needle protocol\'s key (decoder store + sidecar), not the store\'s alone', async () => {
    const file = join(d.root, 'ledger.json')
    const ledger = await SeedLedger.open(file)
    const tokens = Array.from({ length: 600 }, (_, i) => (i * 7) % 512)
    await ledger.record('needle seed 1 (this geometry)', tokens, g.key, 256)
    // Cached under the same store geometry by a stale sidecar: another key.
    await ledger.record('needle seed 2 (stale sidecar)', [...tokens.slice(0, 256), ...tokens.slice(0, 256)], g.store, 256)
    const doc = join(d.root, 'doc.json')
    await writeFile(doc, JSON.stringify(tokens))
    const r = await runGate(d.options({ ledger: file, documents: [doc] }))
    const seeds = r.findings.filter((f) => f.check === 'seeds').map((f) => [f.status, f.message])
    expect(seeds).toEqual([
      ['pass', '2 document(s) recorded; 1 cached under another geometry ("needle seed 2 (stale sidecar)"): never reuse their prefixes as needles or benchmarks'],
      ['fail', `shares its first 256 tokens (1 block(s) of 256) with "needle seed 2 (stale sidecar)", cached under another geometry ${g.store.slice(0, 16)}: the decoder may serve those tokens from old blocks; use a fresh seed`],
      ['warn', 'shares its first 512 tokens with "needle seed 1 (this geometry)" (same geometry): they come from the cache, not from this run\'s bridge'],
    ])
  })
})

// The needle law live, against a real bridge of the `needle` preset (its weights retrieve a needle
// through the compressed caches; same geometry as tiny): a consistent deployment passes with
// --needle-url (the needle past position 1,024, verdict complete, a hit); with the prefill engine and
// front door on a sidecar exported under compress YaRN factor 1, and again 16, the gate fails and
// the needle finding says the bridge declined (geometry mismatch) while the decoder alone still
// retrieves; after re-exporting the sidecar and restarting, a fresh seed passes; the stale run's
// seed given again with the same ledger is flagged as a reused seed, never passed.
import { readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { runGate, type GateReport } from '../../verify/gate/index.ts'
import { askedNeedleBridged, parseNeedleRecord } from '../../verify/needle/record.ts'
import { makeDeployment, type Deployment } from './helpers.ts'
import { startLiveStack, type LiveStack } from './live-stack.ts'

let d: Deployment
let stack: LiveStack
const staleSeeds: number[] = []

beforeAll(async () => {
  d = await makeDeployment('needle-live', 'needle')
  stack = await startLiveStack(d)
})
afterAll(async () => {
  await stack?.stop()
  await d?.cleanup()
})

function needleFindings (r: GateReport): Array<[string, string]> {
  return r.findings.filter((f) => f.check === 'needle').map((f) => [f.status, f.message])
}

const ledger = () => join(d.root, 'needle-ledger.json')

async function staleRun (factor: number): Promise<GateReport> {
  // The prefill node relaunched with its pre-change config, and the sidecar exported from it.
  const stalePrefill = await d.exportSidecarFrom((json) => { json.rope_parameters.compress.factor = factor })
  await stack.restartBridge(stalePrefill)
  return await runGate(d.options({ needleRecords: undefined, needleUrl: stack.front(), needleNativeUrl: stack.nativeUrl, ledger: ledger() }))
}

describe('the needle law against a real bridge (preset needle)', () => {
  it('a consistent deployment with --needle-url passes: the needle past 1,024, verdict complete, a hit, a fresh seed', async () => {
    const reportDir = join(d.root, 'report-ok')
    const r = await runGate(d.options({ needleRecords: undefined, needleUrl: stack.front(), needleNativeUrl: stack.nativeUrl, store: stack.cacheDir, native: true, reportDir }))
    expect(r.findings.filter((f) => f.status !== 'pass')).toEqual([])
    expect(r.verdict.pass).toBe(true)
    const [run] = r.needle
    const rec = run.record!
    expect(run.status).toBe('pass')
    expect(rec.bridged).toMatchObject({ verdict: 'complete', hit: true, outcome: 'pass' })
    expect(rec.native).toMatchObject({ hit: true, outcome: 'pass' })
    expect(rec.needles[0].position).toBeGreaterThanOrEqual(1024)
    expect(askedNeedleBridged(rec)).toBe(true)
    expect(rec.document).toMatchObject({ positions: 'exact', minDistance: 257 })
    expect(rec.document.promptTokens).toBeLessThanOrEqual(1792)
    expect(rec.bridged!.promptTokens).toBe(rec.document.promptTokens)
    expect(rec.answerBudget).toEqual({ maxTokens: 300, belowMinimum: false })
    expect(rec.geometry.fingerprint).toBe(r.needleGeometry!.key)
    expect(needleFindings(r)[0][1]).toMatch(/^bridged pass above the native window: seed \d+, 1,7\d\d-token prompt, the asked needle "\w+" at position 1,[45]\d\d, past the native window 1,024 and inside the 1,536 bridged tokens: verdict complete, answered " \w+"; fresh random seed \(no --ledger: fresh by construction, not checked against earlier runs\); native leg: pass \(answered " \w+"\)$/)
    // The run is written as the protocol writes records, and that record is evidence on its own.
    const [name] = await readdir(join(reportDir, 'needle-runs'))
    const file = join(reportDir, 'needle-runs', name)
    expect(parseNeedleRecord(JSON.parse(await readFile(file, 'utf8')), file)).toEqual(rec)
    const again = await runGate(d.options({ needleRecords: [file] }))
    expect(again.verdict.pass).toBe(true)
    const json = JSON.parse(await readFile(join(reportDir, 'report.json'), 'utf8'))
    expect(json.needle.runs.map((x: { status: string }) => x.status)).toEqual(['pass'])
  })

  for (const factor of [1, 16]) {
    it(`a sidecar exported under compress YaRN factor ${factor}: the bridge declines (geometry mismatch), the gate fails, the decoder alone still retrieves`, async () => {
      const r = await staleRun(factor)
      expect(r.verdict.pass).toBe(false)
      // The tables catch the stale factor too; the needle is the end-to-end check on top.
      expect(r.findings.filter((f) => f.status === 'fail' && f.check === 'rope').map((f) => f.field)).toEqual([
        'ropeParameters.compressed_sparse_attention.factor', 'ropeParameters.heavily_compressed_attention.factor',
      ])
      const [run] = r.needle
      expect(run.status).toBe('fail')
      expect(run.record!.bridged).toMatchObject({ verdictKind: 'declined', route: 'native', outcome: 'not-bridged', bridgedTokens: 0 })
      expect(run.record!.native).toMatchObject({ hit: true, outcome: 'pass' })
      expect(run.record!.ledger).toMatchObject({ outcome: 'fresh', recorded: true })
      expect(needleFindings(r)).toEqual([['fail', expect.stringMatching(/^not a bridged pass above the native window: seed \d+, .*: not bridged, verdict "declined: geometry mismatch: block writer: the capture's sidecar \(profile decoder\) gives geometry [0-9a-f]{64}, the store's is [0-9a-f]{64}: another rope table, window or profile; its blocks would never be served"; the decoder prefilled the prompt itself and answered " \w+", which is never a bridged pass; native leg: pass \(answered " \w+"\)$/)]])
      staleSeeds.push(run.record!.seed)
    })
  }

  it('after re-exporting the sidecar and restarting: a fresh seed passes; the stale run\'s seed is flagged as reused, never passed', async () => {
    expect(staleSeeds).toHaveLength(2)
    await d.exportSidecarFrom(() => {})
    await stack.restartBridge()
    const fixed = await runGate(d.options({ needleRecords: undefined, needleUrl: stack.front(), ledger: ledger() }))
    expect(fixed.findings.filter((f) => f.status === 'fail')).toEqual([])
    expect(fixed.verdict.pass).toBe(true)
    expect(needleFindings(fixed)[0][1]).toMatch(/verdict complete, answered " \w+"; fresh seed \(not in the ledger .*needle-ledger\.json; recorded there now\); native leg: not run$/)

    const reused = await runGate(d.options({ needleRecords: undefined, needleUrl: stack.front(), needleNativeUrl: stack.nativeUrl, ledger: ledger(), needleSeed: staleSeeds[0] }))
    expect(reused.verdict.pass).toBe(false)
    const [run] = reused.needle
    expect(run.record).toMatchObject({ seed: staleSeeds[0], bridged: null, native: null, ledger: { outcome: 'reused-seed', recorded: false } })
    expect(run.record!.refused).toMatch(/^reused seed: /)
    expect(needleFindings(reused)).toEqual([['fail', expect.stringMatching(new RegExp(`^not a bridged pass above the native window: reused seed ${staleSeeds[0]}: the document shares its first [67] block\\(s\\) with "needle seed ${staleSeeds[0]} \\(1792 tokens, depth 1, invocation ${staleSeeds[0]}\\)", cached under another geometry [0-9a-f]{16}; .*use a fresh seed; native leg: not run$`))]])
    expect(reused.findings.filter((f) => f.status === 'fail').map((f) => f.check)).toEqual(['needle'])

    // A chosen seed without a ledger cannot be shown fresh: refused before any request.
    const unledgered = await runGate(d.options({ needleRecords: undefined, needleUrl: stack.front(), needleSeed: staleSeeds[1] }))
    expect(needleFindings(unledgered)).toEqual([['fail', `no live needle run: --needle-seed ${staleSeeds[1]} without --ledger: a chosen seed can be shown fresh only against the ledger of earlier runs; give --ledger FILE, or leave out --needle-seed for a fresh random seed`]])
  })
})

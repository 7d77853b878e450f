// The seed README's exact case: the window grown 1M -> 2M on DeepSeek-V4-Flash (original window
// 65,536). The launch parameters, the prefill node's config.json and the decoder's config.json say
// YaRN factor 32 and 2,097,152 positions; the sidecar kept factor 16 and 1,048,576. The gate must
// name the sidecar's two fields, show the angle error by position and say where it first passes the
// threshold; docs/window-gate.md must show the same numbers. The seed's needle run (a miss above the
// native window with every verdict `complete`) is given as a record and fails the needle law.
import { mkdtemp, mkdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { deepseekV4FlashConfigJson } from '../../src/model/config.ts'
import { angleTable, renderReport, runGate, type GateReport } from '../../verify/gate/index.ts'
import { envText, sidecarJsonFor } from './helpers.ts'
import { deploymentNeedleGeometry, needleRecord } from './needle-records.ts'

let root: string
let report: GateReport
let text: string

function flash (factor: number, maxPositions: number): Record<string, unknown> {
  const json = deepseekV4FlashConfigJson() as Record<string, any>
  json.rope_scaling.factor = factor
  json.max_position_embeddings = maxPositions
  return json
}

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'pd-bridge-gate-seed-'))
  for (const d of ['prefill', 'decoder', 'sidecar']) await mkdir(join(root, d))
  await writeFile(join(root, 'prefill', 'config.json'), JSON.stringify(flash(32, 2_097_152), null, 2))
  await writeFile(join(root, 'decoder', 'config.json'), JSON.stringify(flash(32, 2_097_152), null, 2))
  await writeFile(join(root, 'sidecar', 'sidecar.json'), JSON.stringify(sidecarJsonFor(flash(16, 1_048_576), 'decoder', 2048), null, 2))
  await writeFile(join(root, 'launch.env'), envText({
    PD_MAX_MODEL_LEN: '2097152', PD_ROPE_FACTOR: '32', PD_ORIGINAL_MAX_POS: '65536', PD_DECODER_PROFILE: 'decoder', PD_MAX_BRIDGE_TOKENS: '2000000',
  }))
  // The seed's needle run on this deployment: 120K tokens, the needle at 98,779, bridged, missed.
  const geometry = deploymentNeedleGeometry(join(root, 'decoder', 'config.json'), join(root, 'sidecar'))!
  const missed = needleRecord(geometry, (r) => {
    r.targetTokens = 120_000
    r.document = { ...r.document, promptTokens: 119_990, minDistance: 2049, questionPosition: 119_986 }
    r.needles = [{ ...r.needles[0], depth: 0.82, position: 98_779, distance: 119_990 - 98_779 }]
    r.geometry.blockSize = 2048
    r.bridged = { ...r.bridged!, bridgedTokens: 118_784, promptTokens: 119_990, answer: ' There is no secret word in the text.', hit: false, outcome: 'miss' }
    r.native = { ...r.native!, promptTokens: 119_990 }
  })
  await writeFile(join(root, 'seed-needle.json'), JSON.stringify(missed))
  report = await runGate({
    launch: join(root, 'launch.env'),
    prefillConfig: join(root, 'prefill', 'config.json'),
    sidecar: join(root, 'sidecar'),
    decoderConfig: join(root, 'decoder', 'config.json'),
    native: false,
    needleRecords: [join(root, 'seed-needle.json')],
    reportDir: join(root, 'report'),
  })
  text = renderReport(report)
})
afterAll(async () => await rm(root, { recursive: true, force: true }))

describe('the seed\'s stale sidecar (factor 16 / 1,048,576 while the rest says 32 / 2,097,152)', () => {
  it('fails on exactly the sidecar\'s factor (both compressed layer types) and max_position_embeddings', () => {
    const sidecarFile = join(root, 'sidecar', 'sidecar.json')
    const failing = report.findings.filter((f) => f.status === 'fail').map((f) => [f.file, f.field])
    expect(failing).toEqual([
      [sidecarFile, 'maxPositionEmbeddings'],
      [sidecarFile, 'ropeParameters.compressed_sparse_attention.factor'],
      [sidecarFile, 'ropeParameters.heavily_compressed_attention.factor'],
      [join(root, 'seed-needle.json'), undefined],
    ])
    expect(report.verdict.pass).toBe(false)
    expect(text.trimEnd().split('\n').at(-1)).toBe(`gate: FAIL (4 failure(s); first: ${sidecarFile} maxPositionEmbeddings)`)
    // The launch parameters, the prefill node and the decoder agree: the sidecar is the one place out.
    for (const v of report.rope) expect([v.consensus, v.outliers.map((o) => o.place)]).toEqual([['launch', 'prefill', 'decoder'], ['sidecar']])
  })

  it('fails the needle law on the seed\'s miss: complete verdict, needle past the native window, wrong answer', () => {
    const needle = report.findings.filter((f) => f.check === 'needle')
    expect(needle.map((f) => f.status)).toEqual(['fail'])
    expect(needle[0].message).toBe('not a bridged pass above the native window: seed 4242, 119,990-token prompt, the asked needle "amber" at position 98,779: MISS through the bridge (verdict complete, 118,784 tokens bridged): answered " There is no secret word in the text.", expected "amber"; native leg: pass (answered " amber")')
    expect(text).toContain(`  FAIL ${join(root, 'seed-needle.json')}: seed 4242, verdict "complete", answered " There is no secret word in the text."`)
  })

  it('names the first differing entry and the angle error by position, with its first crossing of 0.1 rad', () => {
    const csa = report.rope.find((v) => v.layerType === 'compressed_sparse_attention')!.outliers[0]
    expect(csa.first).toMatchObject({ position: 1, pair: 16 })
    expect(csa.angle!.firstExceeding).toMatchObject({ position: 9023, pair: 18 })
    expect(csa.angle!.table.map((r) => r.position)).toEqual([1, 10, 100, 1000, 9023, 10000, 65536, 100000, 1000000, 1048575])
    expect(text).toContain('first exceeds 0.1 rad at position 9,023 (pair 18, 1.000e-1 rad)')
    for (const line of angleTable(csa.angle!.table)) expect(text).toContain(line)
    // Sliding layers run plain rope: their tables agree wherever both exist, and differ in extent only.
    const sliding = report.rope.find((v) => v.layerType === 'sliding_attention')!.outliers[0]
    expect(sliding.first).toEqual({ position: 1048576, pair: 0, what: 'position 1,048,576 is in decoder\'s table only (extent 1,048,576 vs 2,097,152)' })
    expect(sliding.angle).toBeUndefined()
  })

  it('writes an SVG plot per outlier next to the report', async () => {
    const svg = await readFile(report.plots.get('compressed_sparse_attention/sidecar')!, 'utf8')
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true)
    expect(svg.trimEnd().endsWith('</svg>')).toBe(true)
    const lines = [...svg.matchAll(/<polyline [^>]*points="([^"]+)"/g)].map((m) => m[1].split(' ').length)
    expect(lines).toHaveLength(2)
    for (const n of lines) expect(n).toBeGreaterThan(200)
    expect(svg).toContain('threshold 0.1 rad')
    expect(svg).toContain('original window 65536')
    expect(report.written).toContain(join(root, 'report', 'report.md'))
    expect(await readFile(join(root, 'report', 'report.md'), 'utf8')).toBe(text)
  })

  it('docs/window-gate.md shows the same numbers', async () => {
    const doc = await readFile(new URL('../../docs/window-gate.md', import.meta.url), 'utf8')
    const csa = report.rope.find((v) => v.layerType === 'compressed_sparse_attention')!.outliers[0]
    for (const line of angleTable(csa.angle!.table)) expect(doc).toContain(line)
    expect(doc).toContain('first exceeds 0.1 rad at position 9,023 (pair 18, 1.000e-1 rad)')
    expect(doc).toContain(`first difference: position 1, pair 16: ${csa.first.what}`)
  })
})

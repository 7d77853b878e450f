// The batched-decode runs in the report (protocols/batch-decode.mjs's records, read as the protocol
// writes them): the schema refuses a total of differing answers that is not the levels' sum, and
// RESULTS.md and report.html get one row per run in their own section after the environments;
// without batch records there is no such section.
import { mkdtemp, mkdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parseBatchRecord, readBatchRecords, type BatchRecord } from '../../verify/results/batch-record.ts'
import { batchTable } from '../../verify/results/batch-section.ts'
import { generateResults } from '../../verify/results/generate.ts'

let dir: string
beforeAll(async () => { dir = await mkdtemp(join(tmpdir(), 'pd-batch-section-')) })
afterAll(async () => { await rm(dir, { recursive: true, force: true }) })

function level (clients: number, decode: number, differ = 0): BatchRecord['levels'][number] {
  return {
    clients, requests: clients, completion_tokens: 32 * clients, wall_s: 1, tokens_per_s: 30 * clients, decode_tokens_per_s: decode,
    ttft_ms: { p50: 100, p99: 200 }, decoder_prefill_ms: { p50: 50, p99: 90 }, e2e_ms: { p50: 900, p99: 1000 },
    batch: { steps: 31, mean_rows: clients - 0.5, widest_so_far: clients }, decoder_peak_rss: 200 * 2 ** 20 + clients * 2 ** 20, load_average_1m: 3, answers_differing_from_solo: differ,
  }
}

const RECORD: BatchRecord = {
  kind: 'batch-decode', version: 1, at: '2026-01-05T00:00:00.000Z', label: 'fixture', model: 'tiny-seed1',
  config: { hidden_size: 256, num_hidden_layers: 4, vocab_size: 512, n_routed_experts: 8 },
  machine: { cpus: 2, cpu: 'Fixture CPU', total_memory: 8 * 2 ** 30, node: 'v20.0.0' },
  settings: { levels: [1, 8], max_tokens: 32, prompt_tokens: 24, max_batch: 8, seed: 1, profile: 'decoder' },
  decoder_rss_at_ready: 180 * 2 ** 20, levels: [level(1, 90), level(8, 270)], speedup_vs_one: { 1: 1, 8: 3 }, answers_differing_from_solo: 0, decoder_peak_rss_hwm: 210 * 2 ** 20,
}

describe('batched-decode records in the report', () => {
  it('the schema: the record total of differing answers is the levels\' sum', () => {
    expect(parseBatchRecord(RECORD, 'a.json')).toEqual(RECORD)
    expect(() => parseBatchRecord({ ...RECORD, levels: [level(1, 90), level(8, 270, 1)] }, 'b.json')).toThrow('b.json: batch-decode record field answers_differing_from_solo: is 0, but the levels sum to 1')
  })

  it('the folder also holds protocols/batch-step.ts records: read past, never refused as a bad batch-decode record', async () => {
    const folder = join(dir, 'with-batch-step')
    await mkdir(folder, { recursive: true })
    await writeFile(join(folder, 'batch-decode-a.json'), JSON.stringify(RECORD))
    await writeFile(join(folder, 'batch-step-b.json'), JSON.stringify({ kind: 'batch-step', version: 1, at: '2026-01-06T00:00:00.000Z', levels: [] }))
    expect(await readBatchRecords(folder)).toEqual([RECORD])
    await writeFile(join(folder, 'batch-decode-c.json'), JSON.stringify({ ...RECORD, kind: 'other' }))
    await expect(readBatchRecords(folder)).rejects.toThrow('batch-decode-c.json')
  })

  it('one row per run: decode tok/s per level, the widest level over 1, the mean batch there, the decoder\'s peak RSS', async () => {
    expect(batchTable([RECORD]).rows).toEqual([['2026-01-05T00:00:00.000Z', 'tiny-seed1', 'Fixture CPU, 2 CPUs', '24 / 32', '1 / 8', '90.0 / 270.0', '3.00x', '7.50', '201 / 208', '3.0 / 3.0', '0']])
    await mkdir(join(dir, 'batch'))
    await writeFile(join(dir, 'batch', 'a.json'), JSON.stringify(RECORD))
    const r = await generateResults(join(dir, 'runs'), join(dir, 'out'))
    expect(r.batchRecords).toBe(1)
    const md = await readFile(join(dir, 'out', 'RESULTS.md'), 'utf8')
    expect(md).toContain(`(batched-decode runs); do not edit by hand.`)
    expect(md).toContain('## Batched decode (the embedded decoder alone)\n\n1 run of protocols/batch-decode.mjs')
    expect(md).toContain('| 2026-01-05T00:00:00.000Z | tiny-seed1 |')
    expect(await readFile(join(dir, 'out', 'report.html'), 'utf8')).toContain('<h2>Batched decode (the embedded decoder alone)</h2>')
    const empty = await generateResults(join(dir, 'none', 'runs'), join(dir, 'out2'))
    expect(empty.batchRecords).toBe(0)
    expect(await readFile(join(dir, 'out2', 'RESULTS.md'), 'utf8')).not.toContain('Batched decode')
  })
})

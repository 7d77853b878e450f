import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { OPENBLAS_ROW_NAME, parseMicroRecord, readMicroRecords } from '../../verify/results/micro-record.ts'
import { microTables } from '../../verify/results/micro-tables.ts'
import { summarizeMicro } from '../../verify/results/micro-summary.ts'
import { readRunRecords } from '../../verify/results/record.ts'
import { summarize } from '../../verify/results/summary.ts'

const FIXTURES = join(import.meta.dirname, 'fixtures')

describe('micro summary: the newest row per measurement, older records counted', () => {
  it('shows matmulF32 from the newer record with one older, and rmsNorm (only in the older record) after the newer rows', async () => {
    const a = (await readMicroRecords(join(FIXTURES, 'micro'))).filter((r) => r.environment.id === 'env-a1b2c3')
    const s = summarizeMicro(a)
    expect(s.records).toBe(3)
    expect(s.kernels.map((e) => [e.row.name, e.record.runId, e.older, e.row.rate])).toEqual([
      ['matmulF32', 'a-kernels-newer', 1, 40],
      ['softmaxPool', 'a-kernels-newer', 0, 3],
      ['rmsNorm', 'a-kernels-older', 0, 40],
    ])
    expect(s.hook.map((e) => e.row.shape)).toEqual(['tiny T=1024', 'tiny T=4096'])
    expect(s.shown.map((r) => r.runId)).toEqual(['a-hook-tiny', 'a-kernels-newer', 'a-kernels-older'])
  })

  it('does not depend on the order the records are read in', async () => {
    const a = (await readMicroRecords(join(FIXTURES, 'micro'))).filter((r) => r.environment.id === 'env-a1b2c3')
    expect(summarizeMicro([...a].reverse())).toEqual(summarizeMicro(a))
  })

  it('a record that no longer holds any newest row is counted but not shown', async () => {
    const a = (await readMicroRecords(join(FIXTURES, 'micro'))).filter((r) => r.runId === 'a-kernels-newer')
    const older = structuredClone(a[0])
    older.runId = 'older-copy'
    older.startedAt = '2026-11-01T00:00:00.000Z'
    const s = summarizeMicro([older, a[0]])
    expect(s.records).toBe(2)
    expect(s.shown.map((r) => r.runId)).toEqual(['a-kernels-newer'])
    expect(s.kernels.map((e) => e.older)).toEqual([1, 1])
  })
})

describe('environments with micro records', () => {
  it('a micro record joins the runs of its environment; one with only micro records gets its own, without sizes', async () => {
    const envs = summarize(await readRunRecords(join(FIXTURES, 'runs')), await readMicroRecords(join(FIXTURES, 'micro')))
    expect(envs.map((e) => [e.environment.id, e.sizes.length, e.micro.records])).toEqual([
      ['env-a1b2c3', 3, 3],
      ['env-c7d8e9', 0, 1],
      ['env-d4e5f6', 1, 0],
    ])
    // The 8-thread row of machine C never lands next to machine A's peaks.
    expect(envs[0].micro.kernels.every((e) => e.record.environment.id === 'env-a1b2c3')).toBe(true)
    expect(envs[1].micro.kernels.map((e) => e.row.peak)).toEqual([500])
    expect(envs[0].commits).toEqual(['1111111', '3333333'])
  })
})

describe('the kernels table: matmul rows next to OpenBLAS measured in the same record', () => {
  it('gives rate / OpenBLAS rate at the same shape of the same record, and nothing across records', async () => {
    const [newer] = (await readMicroRecords(join(FIXTURES, 'micro'))).filter((r) => r.runId === 'a-kernels-newer')
    const withBlas = structuredClone(newer)
    const mm = withBlas.rows.find((r) => r.name === 'matmulF32')!
    withBlas.rows.push({ ...structuredClone(mm), name: OPENBLAS_ROW_NAME, rate: 50, percentOfPeak: 100 * 50 / mm.peak, method: 'timed-median' })
    const record = parseMicroRecord(withBlas, 'in-memory')
    const kernels = microTables(summarizeMicro([record])).find((t) => t.kind === 'kernels')!
    const col = kernels.headers.indexOf('vs OpenBLAS (same record)')
    const cell = (name: string) => kernels.rows.find((r) => r[0] === name)![col]
    expect(cell('matmulF32')).toBe('0.80×') // 40 / 50 GFLOP/s
    expect(cell(OPENBLAS_ROW_NAME)).toBe('—')
    expect(cell('softmaxPool')).toBe('—')
    // The same matmul row with OpenBLAS only in ANOTHER record: no ratio.
    const other = structuredClone(withBlas)
    other.runId = 'blas-only'
    other.startedAt = '2026-11-01T00:00:00.000Z'
    other.rows = other.rows.filter((r) => r.name === OPENBLAS_ROW_NAME)
    const apart = microTables(summarizeMicro([newer, parseMicroRecord(other, 'in-memory')])).find((t) => t.kind === 'kernels')!
    expect(apart.rows.find((r) => r[0] === 'matmulF32')![col]).toBe('—')
  })
})

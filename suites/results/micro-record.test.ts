import { readFileSync } from 'node:fs'
import { copyFile, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { PdBridgeError } from '../../src/errors.ts'
import { microRunId, parseMicroRecord, readMicroRecords, writeMicroRecord, type MicroRecord } from '../../verify/results/micro-record.ts'

const MICRO = join(import.meta.dirname, 'fixtures', 'micro')
const KERNELS = JSON.parse(readFileSync(join(MICRO, 'a-kernels-newer.json'), 'utf8'))
const HOOK = JSON.parse(readFileSync(join(MICRO, 'a-hook-tiny.json'), 'utf8'))

/** A copy of `base` changed by `edit`, parsed as micro record `f.json`. */
function parseEdited (base: unknown, edit: (r: any) => void): MicroRecord {
  const r = structuredClone(base)
  edit(r)
  return parseMicroRecord(r, 'micro/f.json')
}

describe('the micro-benchmark record schema accepts what the benchmarks write', () => {
  it('parses every fixture record, kernels and hook', async () => {
    const records = await readMicroRecords(MICRO)
    expect(records.map((r) => `${r.runId}:${r.suite}:${r.rows.length}`)).toEqual(['a-hook-tiny:hook:2', 'a-kernels-newer:kernels:2', 'a-kernels-older:kernels:2', 'c-kernels:kernels:1'])
  })
})

describe('the micro-benchmark record schema rejects malformed records, naming the file and field', () => {
  const cases: Array<[string, unknown, (r: any) => void, RegExp]> = [
    ['another schema tag', KERNELS, (r) => { r.schema = 'pd-bridge/micro-bench@0' }, /field schema:/],
    ['a missing environment field', KERNELS, (r) => { delete r.environment.cores }, /field environment\.cores:/],
    ['an unknown top-level field', KERNELS, (r) => { r.extra = 1 }, /field \(record\): .*"extra"/],
    ['an unknown field in a row', KERNELS, (r) => { r.rows[0].gflopsPeak = 1 }, /field rows\.0: .*"gflopsPeak"/],
    ['a load average of two numbers', KERNELS, (r) => { r.load.before = [1, 2] }, /field load\.before/],
    ['no rows', KERNELS, (r) => { r.rows = [] }, /field rows:/],
    ['a method it does not know', KERNELS, (r) => { r.rows[1].method = 'best of 5' }, /field rows\.1\.method:/],
    ['a negative rate', KERNELS, (r) => { r.rows[1].rate = -3 }, /field rows\.1\.rate:/],
    ['a zero peak', KERNELS, (r) => { r.rows[1].peak = 0 }, /field rows\.1\.peak:/],
    ['a kernel row without its kernel block', KERNELS, (r) => { delete r.rows[0].kernel }, /field rows\.0\.kernel:/],
    ['a hook row without its payload per token', HOOK, (r) => { delete r.rows[0].hook.payloadBytesPerToken }, /field rows\.0\.hook\.payloadBytesPerToken:/],
    ['a suite it does not know', KERNELS, (r) => { r.suite = 'writer' }, /field suite:/],
    // 25% is right for 40 of 160; 25.5% would flatter the kernel.
    ['a percent of peak that is not rate / peak', KERNELS, (r) => { r.rows[0].percentOfPeak = 25.5 }, /field rows\.0\.percentOfPeak: is 25\.5 but 100 × rate \/ peak is 25/],
    ['a compute rate next to a peak this record did not measure', KERNELS, (r) => {
      r.rows[0].peak = 200
      r.rows[0].percentOfPeak = 20
    }, /field rows\.0\.peak: is 200 but this record measured 160 GFLOP\/s on 2 thread/],
    ['a compute rate on a thread count without a peak', KERNELS, (r) => { r.rows[0].threads = 3 }, /field rows\.0\.threads: 3 has no measured GFLOP\/s peak/],
    ['the same measurement twice', KERNELS, (r) => { r.rows.push(structuredClone(r.rows[0])) }, /field rows\.2\.name: matmulF32 m=1 k=1024 n=1024 on 2 thread\(s\) appears twice/],
  ]
  for (const [what, base, edit, message] of cases) {
    it(`rejects ${what}`, () => {
      expect(() => parseEdited(base, edit)).toThrow(PdBridgeError)
      expect(() => parseEdited(base, edit)).toThrow(/^micro\/f\.json: micro-benchmark record field /)
      expect(() => parseEdited(base, edit)).toThrow(message)
    })
  }

  it('rejects a hook row in a kernels record', () => {
    expect(() => parseEdited(KERNELS, (r) => { r.rows.push(structuredClone(HOOK.rows[0])) })).toThrow(/field rows\.2\.suite: is hook in a kernels record/)
  })
})

describe('reading and writing micro-benchmark records', () => {
  it('a missing directory holds none; a file that is not JSON is named', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'pd-micro-'))
    try {
      expect(await readMicroRecords(join(dir, 'missing'))).toEqual([])
      await writeFile(join(dir, 'broken.json'), '{')
      await expect(readMicroRecords(dir)).rejects.toThrow(/broken\.json: not JSON/)
    }
    finally {
      await rm(dir, { recursive: true, force: true })
    }
  })

  it('two files with the same run id are refused, naming both', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'pd-micro-'))
    try {
      await copyFile(join(MICRO, 'a-kernels-newer.json'), join(dir, 'one.json'))
      await copyFile(join(MICRO, 'a-kernels-newer.json'), join(dir, 'two.json'))
      await expect(readMicroRecords(dir)).rejects.toThrow(/two\.json: micro-benchmark record field runId: a-kernels-newer is also the run id of .*one\.json/)
    }
    finally {
      await rm(dir, { recursive: true, force: true })
    }
  })

  it('writes a valid record as <runId>.json and reads it back equal; refuses an invalid one before writing', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'pd-micro-'))
    try {
      const record = { ...structuredClone(KERNELS), runId: microRunId('2026-12-01T09:08:07.654Z', 'kernels') }
      const file = await writeMicroRecord(join(dir, 'micro'), record)
      expect(file).toBe(join(dir, 'micro', '2026-12-01T09-08-07-654Z-kernels.json'))
      expect(await readMicroRecords(join(dir, 'micro'))).toEqual([record])
      const bad = { ...record, runId: 'bad', rows: [] }
      await expect(writeMicroRecord(join(dir, 'micro'), bad)).rejects.toThrow(/bad\.json: micro-benchmark record field rows/)
      expect((await readMicroRecords(join(dir, 'micro'))).map((r) => r.runId)).toEqual([record.runId])
    }
    finally {
      await rm(dir, { recursive: true, force: true })
    }
  })

  it('run ids carry the start time, the suite and a tag', () => {
    expect(microRunId('2026-12-01T09:08:07.654Z', 'hook', 'small')).toBe('2026-12-01T09-08-07-654Z-hook-small')
  })
})

import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { PdBridgeError } from '../../src/errors.ts'
import { askedNeedleBridged, parseNeedleRecord, readNeedleRecords } from '../../verify/needle/record.ts'
import { fixtureRecords } from './fixtures.ts'

function parseError (json: unknown): string {
  try {
    parseNeedleRecord(json, 'run.json')
  }
  catch (e) {
    expect(e).toBeInstanceOf(PdBridgeError)
    return (e as Error).message
  }
  throw new Error('the record was accepted')
}

describe('the needle run record schema (pd-bridge/needle-run@1)', () => {
  const good = fixtureRecords()

  it('accepts every fixture record as it is', () => {
    for (const r of good) expect(parseNeedleRecord(structuredClone(r), 'run.json')).toEqual(r)
  })

  it('is strict: an unknown field is named', () => {
    expect(parseError({ ...good[0], extra: 1 })).toMatch(/^run\.json: needle record field \(record\): Unrecognized key: "extra"/)
    expect(parseError({ ...good[0], bridged: { ...good[0].bridged, speed: 1 } })).toMatch(/^run\.json: needle record field bridged: Unrecognized key: "speed"/)
  })

  it('refuses a bridged pass without a complete verdict', () => {
    const partial = good.find((r) => r.bridged?.verdictKind === 'partial')!
    expect(parseError({ ...partial, bridged: { ...partial.bridged, outcome: 'pass' } })).toBe('run.json: needle record field bridged.outcome: is pass, but verdict partial with hit true scores not-bridged')
    expect(parseError({ ...good[0], bridged: { ...good[0].bridged, verdict: 'completed' } })).toBe('run.json: needle record field bridged.verdictKind: is complete, but the verdict is "completed"')
    expect(parseError({ ...good[0], bridged: { ...good[0].bridged, hit: false } })).toBe('run.json: needle record field bridged.outcome: is pass, but verdict complete with hit false scores miss')
  })

  it('a reused seed is refused, and a refused run has no legs', () => {
    const refused = good.find((r) => r.refused !== null)!
    expect(parseError({ ...refused, refused: null })).toBe('run.json: needle record field refused: a reused seed must be refused, never run as a scored pass')
    expect(parseError({ ...refused, native: good[0].native })).toBe('run.json: needle record field refused: a refused run has no legs')
  })

  it('checks the fields it holds: schema tag, geometry, depth, native outcome', () => {
    expect(parseError({ ...good[0], schema: 'pd-bridge/needle-run@2' })).toMatch(/^run\.json: needle record field schema: /)
    expect(parseError({ ...good[0], geometry: { ...good[0].geometry, fingerprint: 'abc' } })).toBe('run.json: needle record field geometry.fingerprint: must be 64 lowercase hex digits')
    expect(parseError({ ...good[0], depth: 1.5 })).toMatch(/^run\.json: needle record field depth: /)
    expect(parseError({ ...good[0], native: { ...good[0].native, outcome: 'miss' } })).toBe('run.json: needle record field native.outcome: is miss, but hit is true')
    expect(parseError({ ...good[0], asked: { ...good[0].asked, key: 3 } })).toBe('run.json: needle record field expected: the asked key has no needle, so the expected answer is unknown')
  })
})

describe('reading records', () => {
  it('a missing directory holds none; a bad file is named', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'pd-needle-records-'))
    try {
      expect(await readNeedleRecords(join(dir, 'none'))).toEqual([])
      await writeFile(join(dir, 'a.json'), JSON.stringify(fixtureRecords()[0]))
      await writeFile(join(dir, 'ledger.txt'), 'not a record')
      expect(await readNeedleRecords(dir)).toHaveLength(1)
      await writeFile(join(dir, 'b.json'), '{')
      await expect(readNeedleRecords(dir)).rejects.toThrow(`${join(dir, 'b.json')}: not a readable JSON needle record`)
    }
    finally {
      await rm(dir, { recursive: true, force: true })
    }
  })
})

describe('whether the asked needle went through the bridge', () => {
  it('only when its value lies inside the bridged blocks', () => {
    const [inside, , , , , , , refused, past] = fixtureRecords()
    expect(askedNeedleBridged(inside)).toBe(true)
    expect(past.needles[0].position).toBe(300)
    expect(past.bridged?.bridgedTokens).toBe(256)
    expect(askedNeedleBridged(past)).toBe(false)
    expect(askedNeedleBridged(refused)).toBeNull()
  })
})

// Fuzzing the launch file parser (parseLaunchParams: env-file text, or a JSON object): any text
// either parses or is a ConfigError, never another exception or a hang. Fixed seeds (helpers.ts).
import fc from 'fast-check'
import { afterAll, describe, expect, it } from 'vitest'
import { ConfigError } from '../../src/errors.ts'
import { LAUNCH_KEYS, parseLaunchParams } from '../../verify/gate/index.ts'
import { SEED, Tally, applyJsonEdits, byteEditArb, edgeValueArb, jsonEditArb, judge, mutateText, runs } from './helpers.ts'

const tallies: Tally[] = []
afterAll(() => { for (const t of tallies) console.log(t.line()) })

/** As suites/consistency/launch.test.ts writes them. */
const base = 'PD_MAX_MODEL_LEN=2_097_152\nPD_ROPE_FACTOR=32\nPD_ORIGINAL_MAX_POS=65536\n'
const validEnv = base + '# why\nexport PD_PREFILL_CHUNKED=no\nPD_DEADLINE_CAPTURE_MS="1800000"\nPD_DEADLINE_SUBMIT_MS=10000 # ten s\nPD_ROPE_FACTR=16\nHOME=/root\nPD_DECODER_PROFILE=\'decoder\'\r\n\n'
const validJson = { PD_MAX_MODEL_LEN: 32768, PD_ROPE_FACTOR: '32', PD_ORIGINAL_MAX_POS: 1024, PD_PREFILL_CHUNKED: true }

const KEYS = [...LAUNCH_KEYS.map((s) => s.key), 'PD_DEADLINE_X_MS', 'PD_DEADLINE__MS', 'PD_', 'PD_UNKNOWN', 'HOME', '__proto__', 'PD___proto__', 'export', '_']
const keyArb = fc.oneof(fc.constantFrom(...KEYS), fc.string({ maxLength: 10 }))
const rawValueArb = fc.oneof(
  fc.string({ maxLength: 16 }),
  fc.constantFrom('', '0', '1', '-1', '+5', '1_000', '_1', '1__0', '1.5', '1e3', '1e400', '0x10', 'NaN', 'Infinity', '9007199254740993', 'yes', 'OFF', 'maybe', '"q"', '\'q\'', '"open', 'x # c', '#', ' "a" b', '1'.repeat(400)),
)
const lineArb = fc.oneof(
  fc.tuple(fc.constantFrom('', 'export ', '  ', 'export   '), keyArb, fc.constantFrom('=', ' = ', '=='), rawValueArb).map(([p, k, eq, v]) => p + k + eq + v),
  fc.constantFrom('', '# comment', '   ', 'not an assignment', '=', '=1', 'export', '\t#x'),
  fc.string({ maxLength: 20 }),
)
const envTextArb = fc.tuple(fc.array(lineArb, { maxLength: 10 }), fc.boolean(), fc.constantFrom('\n', '\r\n')).map(([lines, withBase, nl]) => (withBase ? base : '') + lines.join(nl))

describe('launch file: parseLaunchParams', () => {
  it('the valid launch files parse (sanity)', () => {
    expect(parseLaunchParams(validEnv, 'l.env').maxModelLen).toBe(2097152)
    expect(parseLaunchParams(JSON.stringify(validJson), 'l.json').maxModelLen).toBe(32768)
  })

  it('random env-file text parses or is a ConfigError', () => {
    const t = new Tally('launch file, random env-file text'); tallies.push(t)
    fc.assert(fc.property(envTextArb, (text) => {
      judge(t, text, () => parseLaunchParams(text, 'fuzz.env'), ConfigError)
    }), { seed: SEED, numRuns: runs(3000) })
    expect(t.parsed).toBeGreaterThan(0)
  })

  it('byte-mutated valid env files parse or are a ConfigError', () => {
    const t = new Tally('launch file, byte mutations of a valid env file'); tallies.push(t)
    fc.assert(fc.property(fc.array(byteEditArb, { minLength: 1, maxLength: 4 }), (edits) => {
      const text = mutateText(validEnv, edits)
      judge(t, text, () => parseLaunchParams(text, 'fuzz.env'), ConfigError)
    }), { seed: SEED, numRuns: runs(2000) })
  })

  it('JSON launch files (mutated valid ones, random objects) parse or are a ConfigError', () => {
    const t = new Tally('launch file, JSON form'); tallies.push(t)
    fc.assert(fc.property(fc.oneof(
      fc.array(jsonEditArb, { minLength: 1, maxLength: 3 }).map((edits) => JSON.stringify(applyJsonEdits(validJson, edits)) ?? ''),
      fc.dictionary(keyArb, edgeValueArb, { maxKeys: 8 }).map((o) => JSON.stringify({ ...validJson, ...o })),
      fc.array(byteEditArb, { minLength: 1, maxLength: 3 }).map((edits) => mutateText(JSON.stringify(validJson), edits)),
      fc.jsonValue().map((v) => ' ' + (JSON.stringify(v) ?? '')),
    ), (text) => {
      judge(t, text, () => parseLaunchParams(text, 'fuzz.json'), ConfigError)
    }), { seed: SEED, numRuns: runs(2000) })
  })

  it('long lines and long numbers do not hang the parser', () => {
    const t = new Tally('launch file, long inputs'); tallies.push(t)
    fc.assert(fc.property(fc.integer({ min: 1, max: 50_000 }), fc.constantFrom('1', '_', ' ', '#', '"', '1_', 'e', '=', '\n'), (n, unit) => {
      const text = base + 'PD_MAX_BRIDGE_TOKENS=' + unit.repeat(n) + 'x'
      judge(t, `${JSON.stringify(unit)} x ${n}`, () => parseLaunchParams(text, 'fuzz.env'), ConfigError)
    }), { seed: SEED, numRuns: runs(200) })
  })
})

// Fuzzing the front door's config validation (parseFrontConfig, with PD_* overrides): any parsed
// JSON object and any environment either validates or is a ConfigError, never another exception or a
// hang. Fixed seeds (helpers.ts).
import fc from 'fast-check'
import { afterAll, describe, expect, it } from 'vitest'
import { ENV_OVERRIDES, parseFrontConfig } from '../../src/config/index.ts'
import { ConfigError } from '../../src/errors.ts'
import { SEED, Tally, applyJsonEdits, byteEditArb, edgeValueArb, jsonEditArb, judge, mutateText, nastyKeyArb, runs } from './helpers.ts'

const tallies: Tally[] = []
afterAll(() => { for (const t of tallies) console.log(t.line()) })

/** A full valid config (every section present), as suites/front/config.test.ts writes them. */
const full = {
  listen: { host: '127.0.0.1', port: 8012 },
  decoder: { url: 'http://127.0.0.1:8011', model: '/models/m', modelName: 'm', profile: 'decoder', cacheDir: '/cache', blockSize: 2048, requestRules: 'auto' },
  prefill: { url: 'http://127.0.0.1:8020', memoryBudgetBytes: 1 << 30 },
  share: { url: 'http://127.0.0.1:8030' },
  capture: { dir: '/captures', spoolDir: '/spool' },
  sidecar: '/sidecar',
  routing: { minTokens: 1024, minTail: 256, maxBridgeTokens: 262144 },
  queue: { maxWaiting: 4, whenFull: 'native' },
  deadlines: {},
  limits: { maxBodyBytes: 4194304, tokenizeWorkerBytes: 262144, writerBuilders: 0 },
  log: { level: 'info' },
}
const minimal = { decoder: { url: 'http://127.0.0.1:8011' } }
const baseArb = fc.constantFrom(full, minimal)

/** The config as the loader sees it: text parsed with JSON.parse (own __proto__ keys included). */
const viaJson = (v: unknown): unknown => JSON.parse(JSON.stringify(v) ?? 'null')

const envValueArb = fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom('', '0', '7', '65536', '99999999999999999', '1.5', '-1', ' 7', 'http://10.0.0.9:9', 'reject', 'embedded', 'warn', '/x'))
const envArb = fc.dictionary(fc.oneof(fc.constantFrom(...ENV_OVERRIDES.map((o) => o.name)), fc.string({ maxLength: 8 })), envValueArb, { maxKeys: 4 })

describe('front door config: parseFrontConfig', () => {
  it('the valid configs validate (sanity)', () => {
    parseFrontConfig(viaJson(full))
    parseFrontConfig(viaJson(minimal))
  })

  it('structurally mutated configs validate or are a ConfigError', () => {
    const t = new Tally('front config, structural mutations'); tallies.push(t)
    fc.assert(fc.property(baseArb, fc.array(jsonEditArb, { minLength: 1, maxLength: 3 }), (base, edits) => {
      const raw = viaJson(applyJsonEdits(base, edits))
      judge(t, raw, () => parseFrontConfig(raw, {}, 'fuzz.json'), ConfigError)
    }), { seed: SEED, numRuns: runs(3000) })
    expect(t.parsed).toBeGreaterThan(0)
  })

  it('mutated configs under random PD_* environments validate or are a ConfigError', () => {
    const t = new Tally('front config, mutations plus PD_* overrides'); tallies.push(t)
    fc.assert(fc.property(baseArb, fc.array(jsonEditArb, { maxLength: 2 }), envArb, (base, edits, env) => {
      const raw = viaJson(applyJsonEdits(base, edits))
      judge(t, { raw, env }, () => parseFrontConfig(raw, env, 'fuzz.json'), ConfigError)
    }), { seed: SEED, numRuns: runs(2000) })
  })

  it('random JSON values and objects validate or are a ConfigError', () => {
    const t = new Tally('front config, random JSON'); tallies.push(t)
    fc.assert(fc.property(fc.oneof(
      fc.jsonValue(),
      fc.dictionary(nastyKeyArb, edgeValueArb, { maxKeys: 6 }),
      fc.dictionary(fc.constantFrom(...Object.keys(full)), fc.oneof(edgeValueArb, fc.dictionary(nastyKeyArb, edgeValueArb, { maxKeys: 4 })), { maxKeys: 8 }),
      fc.string({ maxLength: 200 }).map((s) => mutateText(JSON.stringify(full), [{ op: 'insert', at: s.length * 7, bytes: [...Buffer.from(s.slice(0, 8))] }])),
    ).map((v) => { try { return viaJson(v) } catch { return v } }), envArb, (raw, env) => {
      judge(t, { raw, env }, () => parseFrontConfig(raw, env), ConfigError)
    }), { seed: SEED, numRuns: runs(2000) })
  })

  it('byte-mutated config text that is still JSON validates or is a ConfigError', () => {
    const t = new Tally('front config, byte mutations of the text (JSON-valid ones)'); tallies.push(t)
    fc.assert(fc.property(fc.array(byteEditArb, { minLength: 1, maxLength: 3 }), (edits) => {
      let raw: unknown
      try { raw = JSON.parse(mutateText(JSON.stringify(full), edits)) } catch { return }
      judge(t, raw, () => parseFrontConfig(raw), ConfigError)
    }), { seed: SEED, numRuns: runs(2000) })
  })
})

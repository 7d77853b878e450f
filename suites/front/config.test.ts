// The front door's config: the JSON file validated with zod (defaults, unknown keys, types,
// URLs), PD_* overrides applied over it, and every error naming the file or variable and the field.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { ENV_OVERRIDES, loadFrontConfig, parseFrontConfig } from '../../src/config/index.ts'
import { ConfigError } from '../../src/errors.ts'
import { readUserFrontSettings } from '../../src/stack/front-settings.ts'
import { DEFAULT_RESTART_POLICY } from '../../src/stack/supervisor.ts'

const dir = mkdtempSync(join(tmpdir(), 'pd-bridge-front-config-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const minimal = { decoder: { url: 'http://127.0.0.1:8011' } }

function refusal (fn: () => unknown): ConfigError {
  try {
    fn()
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError)
    return e as ConfigError
  }
  throw new Error('expected a ConfigError')
}

describe('defaults', () => {
  it('a config with only the decoder URL gets the documented defaults, and bridging parts stay unset', () => {
    const { config } = parseFrontConfig(minimal)
    expect(config.listen).toEqual({ host: '127.0.0.1', port: 8012 })
    expect(config.decoder).toEqual({ url: 'http://127.0.0.1:8011', kvCacheType: 'F32', profile: 'decoder', blockSize: 2048, requestRules: 'auto', omlxBlocks: 'leave' })
    expect(config.routing).toEqual({ minTokens: 1024, minTail: 256, maxBridgeTokens: 262144 })
    expect(config.queue).toEqual({ maxWaiting: 4, whenFull: 'native', concurrentBridges: 1 })
    expect(config.deadlines).toMatchObject({ submitMs: 10000, captureMs: 1800000, writeMs: 600000, rescanMs: 30000, linkMs: 3000 })
    expect(config.prefill.url).toBeUndefined()
    expect(config.share.url).toBeUndefined()
    expect(config.sidecar).toBeUndefined()
    expect(config.limits.maxBodyBytes).toBe(4 * 1024 * 1024)
    expect(config.limits.tokenizeWorkerBytes).toBe(256 * 1024)
    expect(config.limits.writerBuilders).toBe(0)
  })
})

describe('file validation', () => {
  it('names the field and the problem: missing decoder, bad URL, unknown key, out of range, wrong enum', () => {
    expect(refusal(() => parseFrontConfig({})).message).toBe('decoder: is required')
    expect(refusal(() => parseFrontConfig({ decoder: { url: 'ftp://x' } })).field).toBe('decoder.url')
    expect(refusal(() => parseFrontConfig({ decoder: { url: 'http://a:1?x=1' } })).field).toBe('decoder.url')
    const unknown = refusal(() => parseFrontConfig({ ...minimal, routing: { minTokenz: 5 } }))
    expect(unknown.field).toBe('routing.minTokenz')
    expect(unknown.problem).toMatch(/unknown key/)
    expect(refusal(() => parseFrontConfig({ ...minimal, extra: 1 })).field).toBe('extra')
    expect(refusal(() => parseFrontConfig({ ...minimal, routing: { minTokens: 0 } })).field).toBe('routing.minTokens')
    expect(refusal(() => parseFrontConfig({ ...minimal, routing: { minTokens: 1.5 } })).field).toBe('routing.minTokens')
    expect(refusal(() => parseFrontConfig({ ...minimal, listen: { port: 70000 } })).field).toBe('listen.port')
    expect(refusal(() => parseFrontConfig({ ...minimal, queue: { whenFull: 'drop' } })).field).toBe('queue.whenFull')
    expect(refusal(() => parseFrontConfig({ ...minimal, sidecar: '' })).field).toBe('sidecar')
    expect(refusal(() => parseFrontConfig([])).message).toBe('(root): must be a JSON object')
  })

  it('loadFrontConfig reads the file and names it in errors: missing file, bad JSON, bad field', async () => {
    const good = join(dir, 'good.json')
    writeFileSync(good, JSON.stringify({ ...minimal, routing: { minTokens: 700 } }))
    const loaded = await loadFrontConfig({ file: good, env: {} })
    expect(loaded.file).toBe(good)
    expect(loaded.config.routing.minTokens).toBe(700)
    await expect(loadFrontConfig({ file: join(dir, 'nope.json'), env: {} })).rejects.toThrow(`${join(dir, 'nope.json')}: (file): no such file`)
    const bad = join(dir, 'bad.json')
    writeFileSync(bad, '{ "decoder": ')
    await expect(loadFrontConfig({ file: bad, env: {} })).rejects.toThrow(/bad\.json: \(json\): not valid JSON/)
    const wrong = join(dir, 'wrong.json')
    writeFileSync(wrong, JSON.stringify({ decoder: { url: 'http://a:1', blockSize: 'big' } }))
    await expect(loadFrontConfig({ file: wrong, env: {} })).rejects.toThrow(/wrong\.json: decoder\.blockSize: /)
    await expect(loadFrontConfig({ file: dir, env: {} })).rejects.toThrow(/is a directory/)
  })
})

describe('PD_* overrides', () => {
  it('every variable sets its key, over the file', () => {
    const values: Record<string, string> = {}
    for (const o of ENV_OVERRIDES) values[o.name] = o.kind === 'integer' ? '7' : o.kind === 'boolean' ? 'true' : o.key.endsWith('url') ? 'http://10.0.0.9:9' : o.key === 'queue.whenFull' ? 'reject' : o.key === 'capture.retain' ? 'all' : o.key === 'decoder.requestRules' ? 'embedded' : o.key === 'decoder.engine' ? 'llama.cpp' : o.key === 'decoder.kvCacheType' ? 'F16' : o.key === 'log.level' ? 'warn' : `/v/${o.name}`
    const { config, env } = parseFrontConfig({ ...minimal, routing: { minTokens: 100 } }, values)
    expect(env).toEqual(ENV_OVERRIDES.map((o) => o.name))
    for (const o of ENV_OVERRIDES) {
      const got = o.key.split('.').reduce<any>((a, k) => a[k], config)
      expect(String(got), o.name).toBe(values[o.name])
    }
    expect(config.routing.minTokens).toBe(7)
  })

  it('the seed README variables are all there', () => {
    const names = ENV_OVERRIDES.map((o) => o.name)
    for (const n of ['PD_MIN_TOKENS', 'PD_MIN_TAIL', 'PD_MAX_BRIDGE_TOKENS', 'PD_PORT', 'PD_DECODER_URL', 'PD_PREFILL_URL', 'PD_SHARE_URL', 'PD_CAPTURE_DIR', 'PD_CACHE_DIR', 'PD_SIDECAR', 'PD_MODEL', 'PD_BLOCK_SIZE']) expect(names).toContain(n)
    expect(new Set(names).size).toBe(names.length)
  })

  it('empty variables count as unset; a variable can supply a required key', () => {
    const { config } = parseFrontConfig({}, { PD_DECODER_URL: 'http://127.0.0.1:9', PD_MIN_TOKENS: '' })
    expect(config.decoder.url).toBe('http://127.0.0.1:9')
    expect(config.routing.minTokens).toBe(1024)
  })

  it('bad values name the variable: not decimal digits, or refused by the schema', () => {
    for (const text of ['1e3', '0x10', '-1', ' 5', '5 ', '1.5', '99999999999999999']) {
      const e = refusal(() => parseFrontConfig(minimal, { PD_MIN_TOKENS: text }))
      expect(e.message).toContain('PD_MIN_TOKENS')
      expect(e.file).toBe('environment')
    }
    const schema = refusal(() => parseFrontConfig(minimal, { PD_MIN_TOKENS: '0' }))
    expect(schema.message).toBe('environment: routing.minTokens: Too small: expected number to be >=1 (set by PD_MIN_TOKENS)')
    expect(refusal(() => parseFrontConfig(minimal, { PD_PREFILL_URL: 'localhost:8010' })).message).toContain('(set by PD_PREFILL_URL)')
    // An override that cannot be placed (the file has a scalar where an object belongs) says so.
    expect(refusal(() => parseFrontConfig({ ...minimal, routing: 5 }, { PD_MIN_TAIL: '3' })).field).toBe('routing.minTail')
  })
})

describe('restarts (serve\'s restart policy)', () => {
  it('defaults to 5 restarts within 60 s of up time, 0.5 s doubling to 8 s: the supervisor\'s default', () => {
    const { config } = parseFrontConfig(minimal)
    expect(config.restarts).toEqual({ limit: 5, windowMs: 60_000, firstDelayMs: 500, maxDelayMs: 8000 })
    expect(DEFAULT_RESTART_POLICY).toEqual(config.restarts)
  })

  it('refuses bad values in the file and in the variables, naming the field', () => {
    expect(refusal(() => parseFrontConfig({ ...minimal, restarts: { limit: -1 } })).field).toBe('restarts.limit')
    expect(refusal(() => parseFrontConfig({ ...minimal, restarts: { windowMs: 0 } })).field).toBe('restarts.windowMs')
    expect(refusal(() => parseFrontConfig({ ...minimal, restarts: { firstDelayMs: 2.5 } })).field).toBe('restarts.firstDelayMs')
    expect(refusal(() => parseFrontConfig({ ...minimal, restarts: { window: 5 } })).field).toBe('restarts.window')
    expect(refusal(() => parseFrontConfig({ ...minimal, restarts: { firstDelayMs: 9000 } })).message).toBe('restarts.maxDelayMs: maxDelayMs must be at least firstDelayMs')
    expect(refusal(() => parseFrontConfig(minimal, { PD_RESTART_MAX_DELAY_MS: '100' })).message).toBe('environment: restarts.maxDelayMs: maxDelayMs must be at least firstDelayMs (set by PD_RESTART_MAX_DELAY_MS)')
    expect(refusal(() => parseFrontConfig(minimal, { PD_RESTART_WINDOW_MS: '0' })).message).toContain('(set by PD_RESTART_WINDOW_MS)')
    expect(refusal(() => parseFrontConfig(minimal, { PD_RESTART_LIMIT: 'many' })).message).toBe('environment: restarts.limit: PD_RESTART_LIMIT="many" is not a non-negative decimal integer')
    // 0 restarts is a setting (every death stops the stack), not a mistake.
    expect(parseFrontConfig(minimal, { PD_RESTART_LIMIT: '0' }).config.restarts.limit).toBe(0)
  })

  it('the embedded stack\'s front.json may set them; serve applies the PD_RESTART_* variables only, and keeps them out of the front door\'s part', async () => {
    const file = join(dir, 'embedded-front.json')
    writeFileSync(file, JSON.stringify({ restarts: { limit: 9, windowMs: 120_000 }, routing: { minTokens: 600 } }))
    const user = await readUserFrontSettings(file, { PD_RESTART_DELAY_MS: '250', PD_PORT: 'not a port' })
    expect(user.restarts).toEqual({ limit: 9, windowMs: 120_000, firstDelayMs: 250, maxDelayMs: 8000 })
    expect(user.rest).toEqual({})
    expect(user.routing).toEqual({ minTokens: 600 })
    const none = await readUserFrontSettings(join(dir, 'no-such-front.json'), { PD_RESTART_LIMIT: '2' })
    expect(none.restarts.limit).toBe(2)
    await expect(readUserFrontSettings(join(dir, 'no-such-front.json'), { PD_RESTART_LIMIT: '-2' })).rejects.toThrow('environment: restarts.limit: PD_RESTART_LIMIT="-2" is not a non-negative decimal integer')
    writeFileSync(file, JSON.stringify({ restarts: { limit: 'lots' } }))
    await expect(readUserFrontSettings(file, {})).rejects.toThrow(`${file}: restarts.limit: `)
  })
})

// Launch parameters: the env-file syntax an operator writes them in, the JSON form, typing, and
// errors that name the file, the key and the line.
import { describe, expect, it } from 'vitest'
import { ConfigError } from '../../src/errors.ts'
import { parseEnvFile, parseLaunchParams } from '../../verify/gate/index.ts'

function thrown (f: () => unknown): ConfigError {
  try {
    f()
  }
  catch (e) {
    if (e instanceof ConfigError) return e
    throw e
  }
  throw new Error('expected a ConfigError')
}

describe('env-file syntax', () => {
  it('reads KEY=VALUE lines with comments, blanks, export, quotes and trailing comments', () => {
    const text = [
      '# the served window',
      '',
      'PD_MAX_MODEL_LEN=2097152',
      'export PD_ROPE_FACTOR = 32   # was 16 before the 2M change',
      'PD_NAME="a # not a comment"',
      "PD_Q='single quoted' # comment",
      'PD_URL=http://host:8011/#frag',
      '   PD_SPACED=  7  ',
      'PD_EMPTY=',
    ].join('\n')
    const env = parseEnvFile(text, 'launch.env')
    expect([...env].map(([k, e]) => [k, e.value, e.line])).toEqual([
      ['PD_MAX_MODEL_LEN', '2097152', 3],
      ['PD_ROPE_FACTOR', '32', 4],
      ['PD_NAME', 'a # not a comment', 5],
      ['PD_Q', 'single quoted', 6],
      ['PD_URL', 'http://host:8011/#frag', 7],
      ['PD_SPACED', '7', 8],
      ['PD_EMPTY', '', 9],
    ])
  })

  it('names the file, the line and the problem', () => {
    expect(thrown(() => parseEnvFile('A=1\nnot an assignment\n', 'x.env')).message).toBe('x.env: line 2: expected KEY=VALUE, found "not an assignment"')
    expect(thrown(() => parseEnvFile('1BAD=2', 'x.env')).message).toBe('x.env: line 1: "1BAD" is not a valid variable name')
    expect(thrown(() => parseEnvFile('A=1\n# c\nA=2', 'x.env')).message).toBe('x.env: A: line 3: set again (first set on line 1); say it once')
    expect(thrown(() => parseEnvFile('A="open', 'x.env')).message).toBe('x.env: A: line 1: the value opens a " quote that never closes')
    expect(thrown(() => parseEnvFile('A="x" y', 'x.env')).message).toBe('x.env: A: line 1: unexpected text after the closing quote: "y"')
  })
})

describe('launch keys', () => {
  const base = 'PD_MAX_MODEL_LEN=2_097_152\nPD_ROPE_FACTOR=32\nPD_ORIGINAL_MAX_POS=65536\n'

  it('types every key, applies defaults, keeps deadlines and unknown PD_ keys, ignores other variables', () => {
    const p = parseLaunchParams(base + 'PD_PREFILL_CHUNKED=no\nPD_DEADLINE_CAPTURE_MS=1800000\nPD_DEADLINE_SUBMIT_MS=10000\nPD_ROPE_FACTR=16\nHOME=/root\nPD_DECODER_PROFILE=decoder\n', 'l.env')
    expect(p.maxModelLen).toBe(2097152)
    expect(p.ropeFactor).toBe(32)
    expect(p.originalMaxPos).toBe(65536)
    expect(p.prefillChunked).toBe(false)
    expect(p.minAnswerTokens).toBe(256)
    expect(p.deadlineMargin).toBe(1.5)
    expect(p.decoderProfile).toBe('decoder')
    expect(p.maxBridgeTokens).toBeUndefined()
    expect(p.deadlinesMs).toEqual({ PD_DEADLINE_CAPTURE_MS: 1800000, PD_DEADLINE_SUBMIT_MS: 10000 })
    expect(p.unknownKeys).toEqual(['PD_ROPE_FACTR'])
    expect(p.origins.PD_ROPE_FACTOR).toEqual({ file: 'l.env', field: 'PD_ROPE_FACTOR' })
  })

  it('reads the same keys from a JSON object', () => {
    const p = parseLaunchParams(JSON.stringify({ PD_MAX_MODEL_LEN: 32768, PD_ROPE_FACTOR: '32', PD_ORIGINAL_MAX_POS: 1024, PD_PREFILL_CHUNKED: true }), 'l.json')
    expect([p.maxModelLen, p.ropeFactor, p.originalMaxPos, p.prefillChunked]).toEqual([32768, 32, 1024, true])
  })

  it('refuses a missing required key, a bad number and a bad boolean, naming file and key', () => {
    expect(thrown(() => parseLaunchParams('PD_MAX_MODEL_LEN=1\nPD_ROPE_FACTOR=2\n', 'l.env')).message).toMatch(/^l\.env: PD_ORIGINAL_MAX_POS: missing: a required launch key/)
    expect(thrown(() => parseLaunchParams(base + 'PD_MAX_BRIDGE_TOKENS=12.5\n', 'l.env')).message).toBe('l.env: PD_MAX_BRIDGE_TOKENS: expected a positive integer, found "12.5"')
    expect(thrown(() => parseLaunchParams(base + 'PD_STORE_MAX_BYTES=0x10\n', 'l.env')).message).toBe('l.env: PD_STORE_MAX_BYTES: expected a positive integer, found "0x10"')
    expect(thrown(() => parseLaunchParams(base.replace('32', '-1'), 'l.env')).message).toBe('l.env: PD_ROPE_FACTOR: expected a positive number, found "-1"')
    expect(thrown(() => parseLaunchParams(base + 'PD_PREFILL_CHUNKED=maybe\n', 'l.env')).message).toMatch(/^l\.env: PD_PREFILL_CHUNKED: expected a boolean/)
    expect(thrown(() => parseLaunchParams(base + 'PD_DEADLINE_X_MS=soon\n', 'l.env')).field).toBe('PD_DEADLINE_X_MS')
    expect(thrown(() => parseLaunchParams('{"PD_ROPE_FACTOR": 32, "PD_ORIGINAL_MAX_POS": 1024}', 'l.json')).message).toBe('l.json: PD_MAX_MODEL_LEN: missing: a required launch key (the served window in tokens (prompt plus answer); the rope tables must cover exactly this)')
    expect(thrown(() => parseLaunchParams('{"PD_MAX_MODEL_LEN": ', 'l.json')).message).toMatch(/^l\.json: \(json\): not valid JSON/)
    expect(thrown(() => parseLaunchParams('{"PD_MAX_MODEL_LEN": [1]}', 'l.json')).message).toBe('l.json: PD_MAX_MODEL_LEN: expected a string, number or boolean, found [1]')
  })
})

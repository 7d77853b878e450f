// The stack's small parts in process: ready lines, log records, state paths, the children's
// environment, event lines, the doctor's checklist and clock rule, the progress display, the
// demo's prompt, answer comparison and table.
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { Checklist, renderReport } from '../../src/stack/doctor/checks.ts'
import { clockSkew } from '../../src/stack/doctor/probe.ts'
import { describeStackEvent } from '../../src/stack/describe.ts'
import { childEnvironment } from '../../src/stack/embedded.ts'
import { sameAnswer, type LegResult } from '../../src/stack/demo/legs.ts'
import { Progress } from '../../src/stack/demo/progress.ts'
import { buildDemoPrompt } from '../../src/stack/demo/prompt.ts'
import { demoPassed, renderDemoTable, stageItems, type DemoSummary } from '../../src/stack/demo/table.ts'
import { ProcessLog, isJsonObjectLine, logRecordFor } from '../../src/stack/log-file.ts'
import { parseReadyLine } from '../../src/stack/ready-line.ts'
import { cacheDirFor, resolveStateDir, stackPaths } from '../../src/stack/state-dir.ts'
import { stackNumerics } from '../../src/stack/stack-numerics.ts'
import { DECODER_KINDS } from '../../src/decoders/registry.ts'
import { buildTokenizerFiles, renderChat, Tokenizer } from '../../src/model/tokenizer/index.ts'
import { tempDir } from './helpers.ts'

describe('ready lines', () => {
  it('accepts a JSON ready event with an http URL, or a bare URL line', () => {
    expect(parseReadyLine('{"event":"ready","url":"http://127.0.0.1:80","pid":3}')).toEqual({ url: 'http://127.0.0.1:80', fields: { event: 'ready', url: 'http://127.0.0.1:80', pid: 3 } })
    expect(parseReadyLine('http://127.0.0.1:4567\n')).toEqual({ url: 'http://127.0.0.1:4567', fields: {} })
  })

  it('refuses everything else', () => {
    for (const line of ['', 'ready', '{"event":"ready"}', '{"event":"started","url":"http://a:1"}', '{"event":"ready","url":"ftp://a:1"}',
      '{"event":"ready","url":"http://a:1/path"}', '[1]', '{not json', 'http://a:1 extra', 'listening on http://127.0.0.1:1']) {
      expect(parseReadyLine(line)).toBeUndefined()
    }
  })
})

describe('log records', () => {
  it('keeps JSON object lines as they are and wraps anything else in a pino-shaped record', () => {
    expect(isJsonObjectLine('{"level":30}')).toBe(true)
    expect(isJsonObjectLine('[1,2]')).toBe(false)
    expect(isJsonObjectLine('{oops')).toBe(false)
    expect(logRecordFor('{"a":1}', 'x', 1, 'stderr')).toBe('{"a":1}')
    expect(JSON.parse(logRecordFor('pd-bridge: no such file', 'decoder', 42, 'stderr', 1000))).toEqual({ level: 50, time: 1000, pid: 42, name: 'decoder', stream: 'stderr', msg: 'pd-bridge: no such file' })
    expect(JSON.parse(logRecordFor('http://h:1', 'share', 7, 'stdout', 5)).level).toBe(30)
  })

  it('a ProcessLog joins lines split across chunks, keeps the last lines and flushes a last partial line', async () => {
    const tmp = tempDir('stack-log')
    try {
      const log = new ProcessLog(join(tmp.dir, 'sub', 'p.log'), 'p', 3)
      const seen: string[] = []
      log.feed('one\ntw', 'stdout', 1, (l) => seen.push(l))
      log.feed('o\r\nthree\n\nfour\nfi', 'stdout', 1, (l) => seen.push(l))
      log.feed('{"x":1}\n', 'stderr', 1)
      log.flushPartial(1)
      expect(seen).toEqual(['one', 'two', 'three', 'four'])
      expect(log.lastLines()).toEqual(['four', '{"x":1}', 'fi'])
      await log.close()
      const records = readFileSync(join(tmp.dir, 'sub', 'p.log'), 'utf8').trim().split('\n').map((l) => JSON.parse(l))
      expect(records.map((r) => r.msg ?? r.x)).toEqual(['one', 'two', 'three', 'four', 1, 'fi'])
    }
    finally {
      tmp.remove()
    }
  })
})

describe('the state directory', () => {
  it('is the flag, else $PD_STATE_DIR, else ~/.cache/pd-bridge', () => {
    expect(resolveStateDir('/x/y', { PD_STATE_DIR: '/env' })).toBe('/x/y')
    expect(resolveStateDir(undefined, { PD_STATE_DIR: '/env' })).toBe('/env')
    expect(resolveStateDir(undefined, { PD_STATE_DIR: '' })).toMatch(/\/\.cache\/pd-bridge$/)
    expect(resolveStateDir(undefined, {})).toMatch(/\/\.cache\/pd-bridge$/)
  })

  it('gives each checkpoint digest its own block store', () => {
    const p = stackPaths('/s', 'tiny', 1, 'decoder', 256)
    expect(p.model).toBe('/s/models/tiny-seed1')
    expect(p.sidecar).toBe('/s/sidecars/tiny-seed1-decoder-bs256')
    expect(cacheDirFor(p, 'tiny-seed1', 'ab'.repeat(32), 'decoder', 256)).toBe('/s/cache/tiny-seed1-abababababab-decoder-bs256')
    expect(cacheDirFor(p, 'tiny-seed1', 'cd'.repeat(32), 'decoder', 256)).not.toBe(cacheDirFor(p, 'tiny-seed1', 'ab'.repeat(32), 'decoder', 256))
  })

  it('children get the environment without the front door\'s PD_* overrides or PD_STATE_DIR', () => {
    const env = childEnvironment({ PATH: '/bin', PD_PORT: '1', PD_DECODER_URL: 'http://x:1', PD_STATE_DIR: '/s', PD_OTHER: 'kept' })
    expect(env).toEqual({ PATH: '/bin', PD_OTHER: 'kept' })
  })
})

describe('event lines', () => {
  it('say what each child did, and stay quiet for "making"', () => {
    expect(describeStackEvent({ kind: 'ready', name: 'decoder', url: 'http://h:1', pid: 9, ms: 1234 })).toBe('decoder         ready   http://h:1  pid 9  (1.2 s)')
    expect(describeStackEvent({ kind: 'stopped', name: 'share', exit: { code: null, signal: 'SIGKILL' } })).toBe('share           stopped (killed by SIGKILL)')
    expect(describeStackEvent({ kind: 'asset', what: 'sidecar', dir: '/d', action: 'reusing' })).toBe('sidecar         reusing /d')
    expect(describeStackEvent({ kind: 'asset', what: 'sidecar', dir: '/d', action: 'making' })).toBeUndefined()
  })
})

describe('the doctor\'s checklist', () => {
  it('fails when any check fails and names the failures; warnings and skips do not fail', () => {
    const a = new Checklist()
    a.pass('one', 'fine')
    a.warn('two', 'hm')
    a.skip('three', 'n/a')
    const ra = a.report('src')
    expect(ra.ok).toBe(true)
    expect(ra.verdict).toBe('healthy: 1 checks passed, 1 warning (two)')
    const b = new Checklist()
    b.pass('one', 'fine')
    b.fail('decoder', 'down')
    b.fail('share', 'down too')
    const rb = b.report('src')
    expect(rb.ok).toBe(false)
    expect(renderReport(rb)).toBe('pd-bridge doctor: src\n  ok    one      fine\n  FAIL  decoder  down\n  FAIL  share    down too\nverdict: FAILED, 2 of 3 checks failed: decoder, share\n')
  })

  it('counts a Date header as in step when it falls in the request\'s window (one second early for truncation)', () => {
    expect(clockSkew(10_000, 10_500, 10_600)).toBe(0)
    expect(clockSkew(9_500, 10_500, 10_600)).toBe(0)
    expect(clockSkew(9_000, 10_500, 10_600)).toBe(-500)
    expect(clockSkew(13_600, 10_500, 10_600)).toBe(3000)
  })
})

describe('the progress display', () => {
  function sink (isTTY: boolean): { out: { write: (s: string) => boolean, isTTY: boolean }, text: () => string } {
    let text = ''
    return { out: { write: (s) => { text += s; return true }, isTTY }, text: () => text }
  }

  it('writes plain lines, nothing redrawn, when stderr is not a terminal', () => {
    const s = sink(false)
    const p = new Progress(s.out)
    p.begin('starting')
    p.update('starting decoder')
    p.note('decoder ready')
    p.end()
    expect(s.text()).toBe('pd-bridge demo: starting\npd-bridge demo: decoder ready\n')
  })

  it('redraws one status line on a terminal and leaves a ticked line per finished step', () => {
    const s = sink(true)
    const p = new Progress(s.out)
    p.begin('bridged leg')
    p.note('decoder ready')
    p.end()
    p.begin('native leg')
    p.end(true)
    const text = s.text()
    expect(text).toContain('\r\x1b[2K  decoder ready\n')
    expect(text).toMatch(/\r\x1b\[2K✓ bridged leg \(\d+\.\d s\)\n/)
    expect(text).toMatch(/\r\x1b\[2K✗ native leg \(\d+\.\d s\)\n$/)
    expect(text).toMatch(/\r\x1b\[2K[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] bridged leg \(0\.\d s\)/)
  })
})

describe('the demo prompt', () => {
  // The tiny preset's tokenizer (vocab 512), built in memory.
  const tokenizer = Tokenizer.fromJson(JSON.parse(buildTokenizerFiles(512, 32768)['tokenizer.json']))

  it('is the same for the same seed, at least the target long but less than a sentence over, and holds its code word', () => {
    const a = buildDemoPrompt(tokenizer, 700, 42)
    const b = buildDemoPrompt(tokenizer, 700, 42)
    expect(b.tokens).toEqual(a.tokens)
    expect(a.tokens).toEqual(tokenizer.encode(renderChat(a.messages, true)))
    expect(a.tokens.length).toBeGreaterThanOrEqual(700)
    expect(a.tokens.length).toBeLessThan(700 + 40)
    expect(a.messages[1].content).toContain(`The code word is ${a.codeWord}.`)
    expect(a.codeWord).toMatch(/^[a-z]+-\d{4}$/)
  })

  it('is the prompt the former one-sentence-at-a-time shrink gave (digests recorded from it at cb04681)', () => {
    // [target, seed, tokens, SHA-256 of the ids joined by commas, first 16 hex digits]
    const former: Array<[number, number, number, string]> = [[700, 42, 702, '4a539aa6f7f7145e'], [1500, 7, 1517, '4e9f3a826326a46e'],
      [3000, 1, 3008, 'bfc967c40d2752ab'], [333, 99, 366, 'b5ef4b779f048889'], [8192, 5, 8224, '5e006d2573aa858c']]
    for (const [target, seed, length, digest] of former) {
      const p = buildDemoPrompt(tokenizer, target, seed)
      expect([p.tokens.length, createHash('sha256').update(p.tokens.join(',')).digest('hex').slice(0, 16)], `${target} tokens, seed ${seed}`).toEqual([length, digest])
    }
  })

  it('differs in its first block for different seeds (a fresh seed cannot hit an old block)', () => {
    const firsts = new Set([1, 2, 3, 4, 5].map((seed) => buildDemoPrompt(tokenizer, 600, seed).tokens.slice(0, 256).join(',')))
    expect(firsts.size).toBe(5)
  })
})

function leg (over: Partial<LegResult> = {}): LegResult {
  return { ms: 1000, text: 'abc', tokenIds: [1, 2, 3], finishReason: 'length', promptTokens: 600, completionTokens: 3, cachedTokens: 0, verdict: undefined, bridge: undefined, ...over }
}

describe('comparing the answers', () => {
  it('needs the same text, finish reason, length and (when both have them) ids', () => {
    expect(sameAnswer(leg(), leg({ cachedTokens: 512, ms: 5 }))).toBe(true)
    expect(sameAnswer(leg(), leg({ text: 'abd' }))).toBe(false)
    expect(sameAnswer(leg(), leg({ finishReason: 'stop' }))).toBe(false)
    expect(sameAnswer(leg(), leg({ tokenIds: [1, 2, 4] }))).toBe(false)
    expect(sameAnswer(leg(), leg({ tokenIds: undefined }))).toBe(true)
  })
})

describe('the demo table', () => {
  const summary = (over: Partial<DemoSummary> = {}): DemoSummary => ({
    preset: 'tiny', checkpointSeed: 1, blockSize: 256, prefillProfile: 'decoder', promptSeed: 9, promptTokens: 600, codeWord: 'heron-1234',
    bridged: leg({ verdict: 'complete', cachedTokens: 512, ms: 2000, bridge: { bridged_tokens: 512, timings_ms: { engine_prefill: 800, transfer: 20, custom_stage: 5 } } }),
    native: leg({ ms: 1000 }),
    answersMatch: true,
    decoder: 'ours',
    blocks: { keys: 2, bridgedDir: '/a', nativeDir: '/b', missingBridged: [], missingNative: [], report: { blocks: [], identical: 2, total: 2 } },
    verifyCommand: 'pd-bridge verify-blocks /a /b',
    ...over,
  })

  it('orders stage timings and keeps unknown ones', () => {
    expect(stageItems({ transfer: 20, engine_prefill: 800, custom_stage: 5, note: 'x' })).toEqual(['engine prefill 0.80 s', 'transfer 0.02 s', 'custom stage 0.01 s'])
  })

  it('passes only with verdict complete, matching answers and every block identical', () => {
    expect(demoPassed(summary())).toBe(true)
    const table = renderDemoTable(summary())
    expect(table).toContain('  verdict           complete (512 tokens bridged)\n')
    expect(table).toContain('  prompt tokens     600 (2 full blocks, 88 in the tail)\n')
    expect(table).toContain('  native time       1.00 s on a decoder with an empty block store (bridged / native = 2.00)\n')
    expect(table.trim().split('\n').at(-1)).toMatch(/^PASS: /)
    const partial = summary({ bridged: leg({ verdict: 'partial 256/600' }) })
    expect(demoPassed(partial)).toBe(false)
    expect(renderDemoTable(partial).trim().split('\n').at(-1)).toBe('FAIL: verdict is partial 256/600, not complete')
    expect(demoPassed(summary({ answersMatch: false }))).toBe(false)
    const noBlocks = summary({ blocks: { ...summary().blocks!, report: { blocks: [], identical: 0, total: 0 } } })
    expect(demoPassed(noBlocks)).toBe(false)
    expect(renderDemoTable(noBlocks).trim().split('\n').at(-1)).toBe('FAIL: no blocks to compare')
    expect(demoPassed(summary({ blocks: { ...summary().blocks!, report: { blocks: [], identical: 1, total: 2 } } }))).toBe(false)
  })

  it('with llama.cpp as the decoder: passes on a compared state, prints each section, fails on a missing file', () => {
    const section = { section: 'window', values: 100, identical: 90, histogram: [90, 6, 4, 0, 0, 0, 0], maxUlp: 2, maxAbs: 1e-6, excluded: 0 }
    const states = { boundary: 512, key: 'k', bridgedFile: '/a/k.llstate', nativeFile: '/b/k.llstate', missing: [] as Array<'bridged' | 'native'>, sections: [section] }
    const ll = summary({ decoder: 'llama.cpp', blocks: undefined, verifyCommand: undefined, states })
    expect(demoPassed(ll)).toBe(true)
    const table = renderDemoTable(ll)
    expect(table).toContain('state vs llama.cpp  after 512 tokens, bridge-built vs llama.cpp\'s own: 90/100 values identical (90.00%), worst 2 ulp')
    expect(table).toContain('on a llama.cpp decoder with an empty state store')
    expect(table.trim().split('\n').at(-1)).toMatch(/^PASS: .*llama\.cpp/)
    const missing = summary({ decoder: 'llama.cpp', blocks: undefined, states: { ...states, missing: ['bridged'], sections: [] } })
    expect(demoPassed(missing)).toBe(false)
    expect(renderDemoTable(missing).trim().split('\n').at(-1)).toBe('FAIL: no state file at the bridged boundary in the bridged store')
  })
})

describe('what the stack computes in for each decoder kind (stack-numerics.ts)', () => {
  it('a kind whose cacheMath is its stack profile gets no cache math record; one whose cacheMath is a cache math gets it on top of its stack profile', () => {
    for (const k of DECODER_KINDS) {
      const n = stackNumerics(k)
      if (k.external === undefined) {
        expect(n, k.name).toEqual({ profile: k.cacheMath })
      } else {
        expect(n.profile, k.name).toBe(k.external.stackProfile)
        expect(n.cacheMath === undefined ? n.profile : n.cacheMath, k.name).toBe(k.cacheMath)
      }
    }
    // At least one kind (the external one) runs the stack under a cache math.
    expect(DECODER_KINDS.some((k) => stackNumerics(k).cacheMath === 'mlx-cpu')).toBe(true)
  })

  it('refuses a record whose cacheMath is neither its stack profile nor a cache math', () => {
    const external = DECODER_KINDS.find((k) => k.external !== undefined)!.external
    expect(() => stackNumerics({ cacheMath: 'no-such-math', external })).toThrow(/cacheMath "no-such-math" is neither its stack profile "decoder" nor a cache math \(decoder, mlx-cpu\)/)
  })
})

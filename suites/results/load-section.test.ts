// The load section of RESULTS.md and report.html, from a fixture load record (no stack runs here:
// protocols/load.mjs is the real run, suites/results/load-protocol-smoke.test.ts its smoke). The
// counting rules (an error is neither 2xx nor 429; totals are the routes' sums; percentiles are
// nearest-rank and ordered) are held by the schema, several runs get a runs table, and without load
// records the report has no load section at all. The protocol's --help starts and writes nothing.
import { mkdtemp, mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { execa } from 'execa'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { generateResults } from '../../verify/results/generate.ts'
import { isLoadError, loadTotals, parseLoadRecord, percentiles, verdictGroup, type LoadRecord, type LoadSample } from '../../verify/results/load-record.ts'
import { loadHeadline, loadMemoryTable, loadRouteTable, loadVerdictTable, summarizeLoad } from '../../verify/results/load-section.ts'

const ROOT = join(import.meta.dirname, '..', '..')
const FIXTURE = join(import.meta.dirname, 'fixtures', 'load-run.json')

let dir: string
let fixture: LoadRecord
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'pd-load-section-'))
  fixture = parseLoadRecord(JSON.parse(await readFile(FIXTURE, 'utf8')), FIXTURE)
})
afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

function sample (over: Partial<LoadSample> = {}): LoadSample {
  return { route: 'native-short', status: 200, streamed: false, ms: 100, ttftMs: null, verdict: 'declined: short prompt (204 tokens < PD_MIN_TOKENS 512)', promptTokens: 204, retryAfter: null, message: null, ...over }
}

/** A deep copy of the fixture with `change` applied. */
function changed (change: (r: LoadRecord) => void): unknown {
  const r = structuredClone(fixture)
  change(r)
  return r
}

describe('the counting rules', () => {
  it('an error is no answer or a status neither 2xx nor 429', () => {
    expect([null, 500, 502, 404, 400, 301].map(isLoadError)).toEqual([true, true, true, true, true, true])
    expect([200, 201, 429].map(isLoadError)).toEqual([false, false, false])
  })

  it('nearest-rank percentiles; verdicts grouped with their numbers as N', () => {
    expect(percentiles([])).toBeNull()
    expect(percentiles([5])).toEqual({ p50: 5, p90: 5, p99: 5, max: 5 })
    const hundred = Array.from({ length: 100 }, (_, i) => 100 - i)
    expect(percentiles(hundred)).toEqual({ p50: 50, p90: 90, p99: 99, max: 100 })
    expect(verdictGroup('declined: warm prompt (512 of 719 tokens cached; 207 uncached < PD_MIN_TAIL 256)')).toBe('declined: warm prompt (N of N tokens cached; N uncached < PD_MIN_TAIL N)')
    expect(verdictGroup(null)).toBe('(no verdict)')
  })

  it('loadTotals: 429s apart from errors, Retry-After counted, error samples kept, latencies of 2xx answers only', () => {
    const t = loadTotals([
      sample({ ms: 100 }),
      sample({ ms: 300, streamed: true, ttftMs: 250 }),
      sample({ status: 429, ms: 5, retryAfter: '2', verdict: 'declined: bridge queue full (4 waiting), request refused', route: 'bridged' }),
      sample({ status: 429, ms: 5, route: 'bridged' }),
      sample({ status: 502, ms: 9000, message: 'HTTP 502: bad gateway', route: 'warm' }),
      sample({ status: null, ms: 9000, message: 'TypeError: ECONNRESET', route: 'warm', streamed: true }),
    ])
    expect(t.totals).toEqual({ requests: 6, ok: 2, errors: 2, rateLimited: 2, retryAfterSeen: 1, latencyMs: { p50: 100, p90: 300, p99: 300, max: 300 } })
    const [bridged, warm, short] = t.routes
    expect(bridged).toMatchObject({ route: 'bridged', requests: 2, ok: 0, errors: 0, rateLimited: 2, retryAfterSeen: 1, latencyMs: null, verdicts: [] })
    expect(warm).toMatchObject({ route: 'warm', requests: 2, ok: 0, errors: 2, latencyMs: null })
    expect(short).toMatchObject({ requests: 2, ok: 2, streamed: 1, ttftMs: { p50: 250, p90: 250, p99: 250, max: 250 } })
    expect(short.verdicts).toEqual([{ verdict: 'declined: short prompt (N tokens < PD_MIN_TOKENS N)', requests: 2, latencyMs: { p50: 100, p90: 300, p99: 300, max: 300 } }])
    expect(t.errorSamples).toEqual([
      { route: 'warm', status: 502, streamed: false, message: 'HTTP 502: bad gateway' },
      { route: 'warm', status: null, streamed: true, message: 'TypeError: ECONNRESET' },
    ])
  })

  it('the schema refuses a record that breaks them, naming the file and the field', () => {
    expect(parseLoadRecord(JSON.parse(JSON.stringify(fixture)), 'a.json')).toEqual(fixture)
    expect(() => parseLoadRecord(changed((r) => { r.totals.errors = 1 }), 'e.json')).toThrow(/^e\.json: load record field totals\.errors: is 1, but the routes sum to 0$/)
    expect(() => parseLoadRecord(changed((r) => { r.routes[0].errors = 1 }), 'r.json')).toThrow(/r\.json: load record field routes\.0\.requests: must be ok \+ errors \+ rateLimited/)
    expect(() => parseLoadRecord(changed((r) => { r.routes[1].latencyMs = { p50: 5, p90: 4, p99: 6, max: 6 } }), 'p.json')).toThrow(/p\.json: load record field routes\.1\.latencyMs: percentiles must be ordered/)
    expect(() => parseLoadRecord(changed((r) => { r.routes.reverse() }), 'o.json')).toThrow(/o\.json: load record field routes\.0\.route: must be bridged/)
    expect(() => parseLoadRecord(changed((r) => { r.settings.mix.warm = 0.5 }), 'm.json')).toThrow(/m\.json: load record field settings\.mix: must sum to 1/)
    expect(() => parseLoadRecord({ ...fixture, schema: 'pd-bridge/load-run@0' }, 's.json')).toThrow(/s\.json: load record field schema/)
    expect(() => parseLoadRecord({ ...fixture, extra: 1 }, 'x.json')).toThrow(/x\.json: load record field/)
  })
})

describe('the headline and the tables', () => {
  it('the headline: requests, clients, duration, errors, 429s with Retry-After, p99 over all and per route', () => {
    expect(loadHeadline(fixture)).toBe('load: 9 requests (16 clients, 60 s), 0 errors, 1 429 (1 with Retry-After), p99 3.10 s (bridged 3.10 s, warm 0.60 s, native-short 0.70 s)')
  })

  it('one row per route, the verdicts per route, the peak memory per process', () => {
    const s = summarizeLoad([fixture])!
    expect(loadRouteTable(s).rows).toEqual([
      ['bridged', '4', '721', '3', '0', '1 (1)', '2', '2.40 s', '3.10 s', '3.10 s', '1.70 s', '2.30 s', '2.30 s'],
      ['warm', '2', '719', '2', '0', '0 (0)', '1', '0.40 s', '0.60 s', '0.60 s', '0.35 s', '0.35 s', '0.35 s'],
      ['native-short', '3', '207', '3', '0', '0 (0)', '2', '0.50 s', '0.70 s', '0.70 s', '0.25 s', '0.65 s', '0.65 s'],
    ])
    expect(loadVerdictTable(s).rows).toEqual([
      ['bridged', 'complete', '2', '2.40 s', '3.10 s'],
      ['bridged', 'declined: bridge queue full (N waiting behind the running bridge)', '1', '1.80 s', '1.80 s'],
      ['warm', 'declined: warm prompt (N of N tokens cached; N uncached < PD_MIN_TAIL N)', '2', '0.40 s', '0.60 s'],
      ['native-short', 'declined: short prompt (N tokens < PD_MIN_TOKENS N)', '3', '0.50 s', '0.70 s'],
    ])
    expect(loadMemoryTable(s).rows).toEqual([['decoder', '240.0 MiB'], ['front', '180.0 MiB'], ['prefill-engine', '230.0 MiB'], ['protocol', '190.0 MiB'], ['share', '140.0 MiB']])
  })
})

describe('RESULTS.md and report.html', () => {
  it('an environment with load records gets a load section: headline, run line, tables and, with several runs, the runs table', async () => {
    const load = join(dir, 'load')
    await mkdir(load)
    await writeFile(join(load, 'b.json'), JSON.stringify(fixture))
    const older = changed((r) => { r.runId = 'load-fixture-0'; r.startedAt = '2026-01-04T00:00:00.000Z' })
    await writeFile(join(load, 'a.json'), JSON.stringify(older))
    const out = join(dir, 'out')
    const r = await generateResults(join(dir, 'runs'), out, join(dir, 'micro'), join(dir, 'needle'), join(dir, 'faults'), load)
    expect(r.loadRecords).toBe(2)
    const md = await readFile(join(out, 'RESULTS.md'), 'utf8')
    expect(md).toContain(`and \`${load}/\` (load protocol runs); do not edit by hand.`)
    expect(md.match(/^## Environment .*/gm)).toEqual(['## Environment env-10ad'])
    expect(md).toContain(`### Load\n\n${loadHeadline(fixture)}.\n`)
    expect(md).toContain('Newest run load-fixture-a (commit abc1234, 2026-01-05T00:00:00.000Z): 16 concurrent clients for 60 s, 20% bridged, 40% warm, 40% native-short;')
    expect(md).toContain('; 1 earlier run listed below. protocols/load.mjs')
    expect(md).toContain('| bridged | 4 | 721 | 3 | 0 | 1 (1) | 2 | 2.40 s | 3.10 s | 3.10 s | 1.70 s | 2.30 s | 2.30 s |')
    expect(md).toContain('| warm | declined: warm prompt (N of N tokens cached; N uncached < PD_MIN_TAIL N) | 2 | 0.40 s | 0.60 s |')
    expect(md).toContain('#### Load runs')
    expect(md).toContain('| load-fixture-0 | abc1234 | 16 | 60 s | 9 | 0 | 1 | 0.60 s | 3.10 s |')
    expect(md).toContain('- Load (protocols/load.mjs):')
    const html = await readFile(join(out, 'report.html'), 'utf8')
    expect(html).toContain(`<p class="load-headline">${loadHeadline(fixture)}.</p>`)
    expect(html).toContain('<h4>Load runs</h4>')
  })

  it('without load records there is no load section and no load rule', async () => {
    const out = join(dir, 'out-none')
    await generateResults(join(dir, 'runs'), out, join(dir, 'micro'), join(dir, 'needle'), join(dir, 'faults'), join(dir, 'no-load'))
    const md = await readFile(join(out, 'RESULTS.md'), 'utf8')
    expect(md).not.toContain('### Load')
    expect(md).not.toContain('protocols/load.mjs')
    expect(md).not.toContain('(load protocol runs)')
  })
})

describe('protocols/load.mjs', () => {
  it('--help prints the usage and exits 0 having started and written nothing; a bad flag is one line and exit 2', async () => {
    const cwd = await mkdtemp(join(dir, 'cwd-'))
    const state = join(cwd, 'state')
    const help = await execa('node', [join(ROOT, 'protocols', 'load.mjs'), '--clients', '4', '--help'], { cwd, reject: false, env: { PD_STATE_DIR: state } })
    expect(help.exitCode).toBe(0)
    expect(help.stderr).toBe('')
    expect(help.stdout).toMatch(/^Usage: npx zx protocols\/load\.mjs \[options\]/)
    expect(help.stdout).toContain('--clients N')
    expect(help.stdout).toContain('--duration-s N')
    expect(await readdir(cwd)).toEqual([])
    for (const [args, line] of [
      [['--clients', '0'], /^load: --clients must be an integer from 1 to 256, got "0"$/],
      [['--mix', '1,2'], /^load: --mix must be three weights B,W,S/],
      [['--when-full', 'drop'], /^load: --when-full drop: expected native or reject$/],
      [['--short-tokens', '600'], /^load: --short-tokens must be an integer from 1 to 448/],
      [['--duration'], /^load: unknown option --duration \(see --help\)$/],
    ] as const) {
      const bad = await execa('node', [join(ROOT, 'protocols', 'load.mjs'), ...args], { cwd, reject: false, env: { PD_STATE_DIR: state } })
      expect(bad.exitCode, args.join(' ')).toBe(2)
      expect(bad.stderr.trim().split('\n')).toHaveLength(1)
      expect(bad.stderr.trim()).toMatch(line)
    }
    expect(await readdir(cwd)).toEqual([])
  })
})

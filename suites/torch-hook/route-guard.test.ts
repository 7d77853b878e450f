// The torch prefill server's route guard and redactor (src/engines/torch/prefill_server/route_guard.py,
// redact.py) agree with the TypeScript ones every other port uses (src/http/route-guard.ts): the
// shared table of spellings, then fast-check targets judged by both, outcome for outcome. Standard
// library only: runs wherever a python3 is.
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { HANG_LIMIT_MS } from '../support/hang-limit.ts'
import { normalizeTarget } from '../../src/http/route-guard.ts'

const TORCH_DIR = fileURLToPath(new URL('../../src/engines/torch', import.meta.url))
const cases = JSON.parse(readFileSync(new URL('../http/route-guard-cases.json', import.meta.url), 'utf8')) as { normalized: Array<[string, string]>, refused: Array<[string, number]> }

const SCRIPT = `
import json, sys
sys.path.insert(0, sys.argv[1])
from prefill_server.route_guard import Refused, normalize_target
from prefill_server.redact import path_redactor
out = []
for raw in json.load(sys.stdin)['targets']:
    try:
        out.append({'path': normalize_target(raw)[0]})
    except Refused as r:
        out.append({'status': r.status})
redact = path_redactor([('/srv/pd/captures', 'captureRoot')])
print(json.dumps({'judged': out, 'redacted': redact('cannot read /srv/pd/captures/x/manifest.json; /srv/pd/capturesX stays')}))
`

/** What Python's guard makes of each target: its normalized path or its refusal's status. */
function python (targets: string[]): { judged: Array<{ path?: string, status?: number }>, redacted: string } {
  const out = execFileSync('/usr/bin/python3', ['-c', SCRIPT, TORCH_DIR], { input: JSON.stringify({ targets }), encoding: 'utf8', timeout: HANG_LIMIT_MS })
  return JSON.parse(out) as { judged: Array<{ path?: string, status?: number }>, redacted: string }
}

const typescript = (raw: string): { path?: string, status?: number } => {
  const t = normalizeTarget(raw)
  return t.ok ? { path: t.path } : { status: t.status }
}

describe('the torch server judges targets as every other port does', () => {
  it('the shared table, and the redactor at path boundaries', () => {
    const targets = [...cases.normalized.map(([raw]) => raw), ...cases.refused.map(([raw]) => raw)]
    const { judged, redacted } = python(targets)
    expect(judged).toEqual([...cases.normalized.map(([, path]) => ({ path })), ...cases.refused.map(([, status]) => ({ status }))])
    expect(redacted).toBe('cannot read <captureRoot>/x/manifest.json; /srv/pd/capturesX stays')
  })

  it('fast-check targets: the same outcome in Python as in TypeScript', () => {
    const piece = fc.oneof(
      fc.constantFrom('v1', 'prefill', 'health', '.', '..', '', '%2e', '%2E%2e', '%2F', '%5c', '%00', '%25', '%C3%A9', '%c3', '%zz', '\\\\', 'a b', '\\u00e9', '~x', 'A:B@c'),
      fc.string({ unit: 'binary-ascii', maxLength: 4 }),
    )
    const targets = fc.sample(fc.tuple(fc.array(piece, { maxLength: 6 }), fc.option(fc.constantFrom('?', '?x=%2F'), { nil: '' }))
      .map(([parts, q]) => '/' + parts.join('/') + q), { numRuns: 2000, seed: 38 })
    const { judged } = python(targets)
    targets.forEach((t, i) => expect(judged[i], JSON.stringify(t)).toEqual(typescript(t)))
  })
})

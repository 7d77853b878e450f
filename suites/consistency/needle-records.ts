// Needle run records for the gate's suites, built in code so the record schema checks them like any
// record: a run as protocols/needle.mjs writes it after a bridged pass above the native window of
// the tiny/needle geometry (1,790 tokens, the needle at 1,533, 1,536 tokens bridged), under a
// given geometry, and variants of it with one thing changed.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { Geometry } from '../../src/wire/geometry.ts'
import { needleGeometry, type NeedleGeometry } from '../../verify/gate/index.ts'
import { parseDeepseekV4Config } from '../../src/model/config.ts'
import { getProfile } from '../../src/model/profiles/index.ts'
import { NEEDLE_RECORD_SCHEMA, parseNeedleRecord, type NeedleRunRecord } from '../../verify/needle/record.ts'

/**
 * The key the gate computes for a deployment on disk: the decoder store's geometry (its config.json
 * under the decoder profile) and the sidecar's fingerprint; undefined when either cannot be read.
 */
export function deploymentNeedleGeometry (decoderConfig: string, sidecarDir: string): NeedleGeometry | undefined {
  try {
    const cfg = parseDeepseekV4Config(JSON.parse(readFileSync(decoderConfig, 'utf8')))
    const sidecar = JSON.parse(readFileSync(join(sidecarDir, 'sidecar.json'), 'utf8')) as { fingerprint: string }
    return needleGeometry(Geometry.fromConfig(cfg, getProfile('decoder')).fingerprint, sidecar.fingerprint)
  }
  catch {
    return undefined
  }
}

/** A bridged pass above the native window under `geometry`, with `change` applied (validated by the schema). */
export function needleRecord (geometry: NeedleGeometry, change: (r: NeedleRunRecord) => void = () => {}): NeedleRunRecord {
  const r: NeedleRunRecord = {
    schema: NEEDLE_RECORD_SCHEMA,
    runId: '2026-01-01T00-00-00-000Z-1792-d1-r0-4242',
    startedAt: '2026-01-01T00:00:00.000Z',
    environment: { id: 'env-fixture00000', cpu: 'Test CPU', cores: 2, memoryBytes: 8589934592, node: 'v20.20.2', os: 'linux test x64', commit: '1111111', configFingerprint: 'remote', model: 'remote http://127.0.0.1:8012' },
    invocationSeed: 4242,
    seed: 4242,
    repeat: 0,
    targetTokens: 1792,
    depth: 1,
    document: { promptTokens: 1790, positions: 'exact', charsPerToken: null, minDistance: 257, questionPosition: 1786 },
    needles: [{ key: 0, marker: 'The secret word is', value: ' amber', depth: 1, position: 1533, distance: 257 }],
    asked: { key: 0, question: 'What is the secret word?' },
    expected: 'amber',
    answerBudget: { maxTokens: 300, belowMinimum: false },
    geometry: { fingerprint: geometry.key, source: 'front-door', store: geometry.store, sidecar: geometry.sidecar, label: null, blockSize: 256 },
    ledger: { file: '/srv/pd/needle-ledger.json', unit: 'tokens', outcome: 'fresh', reuses: [], recorded: true },
    refused: null,
    bridged: { verdict: 'complete', verdictKind: 'complete', route: 'bridge', bridgedTokens: 1536, promptTokens: 1790, completionTokens: 2, finishReason: 'stop', answer: ' amber', hit: true, outcome: 'pass', totalMs: 900, ttftMs: 850 },
    native: { promptTokens: 1790, completionTokens: 2, finishReason: 'stop', answer: ' amber', hit: true, outcome: 'pass', totalMs: 700, ttftMs: 650 },
  }
  change(r)
  return parseNeedleRecord(r, 'fixture needle record')
}

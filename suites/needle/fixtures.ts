// Needle run records for the record and heatmap suites: two environments; passes, misses, a partial,
// two declined runs, a refused reused seed, a native-only run, a repeat and a pass with the needle
// past the bridged blocks. Built in code, so the schema checks them like any record.
import { NEEDLE_RECORD_SCHEMA, type NeedleRunRecord } from '../../verify/needle/record.ts'
import type { RunEnvironment } from '../../verify/results/record.ts'

export const ENV_A: RunEnvironment = { id: 'env-aaaaaaaaaaaa', cpu: 'Test CPU', cores: 2, memoryBytes: 8589934592, node: 'v20.20.2', os: 'linux test x64', commit: '1111111', configFingerprint: 'cfg-a', model: 'embedded needle (seed 1, blocks of 256)' }
export const ENV_B: RunEnvironment = { ...ENV_A, id: 'env-bbbbbbbbbbbb', configFingerprint: 'remote', model: 'remote http://front:8012' }

const GEOMETRY = 'a'.repeat(64)

type Bridged = NonNullable<NeedleRunRecord['bridged']>
type Native = NonNullable<NeedleRunRecord['native']>

function bridged (verdict: string, hit: boolean, bridgedTokens: number): Bridged {
  const verdictKind = verdict === 'complete' ? 'complete' : verdict.startsWith('partial') ? 'partial' : 'declined'
  return {
    verdict, verdictKind, route: verdictKind === 'declined' ? 'native' : 'bridge', bridgedTokens, promptTokens: 2000, completionTokens: 2,
    finishReason: 'stop', answer: hit ? ' amber' : ' teal', hit, outcome: verdictKind !== 'complete' ? 'not-bridged' : hit ? 'pass' : 'miss', totalMs: 100, ttftMs: 90,
  }
}

function native (hit: boolean): Native {
  return { promptTokens: 2000, completionTokens: 2, finishReason: 'stop', answer: hit ? ' amber' : ' unknown', hit, outcome: hit ? 'pass' : 'miss', totalMs: 80, ttftMs: 70 }
}

/** One record; `position` is the asked (only) needle's value position. */
export function record (o: { env?: RunEnvironment, targetTokens: number, depth: number, seed: number, repeat?: number, position?: number, bridged: Bridged | null,
  native: Native | null, refused?: string }): NeedleRunRecord {
  const promptTokens = o.targetTokens - 5
  const position = o.position ?? Math.round(3 + o.depth * (promptTokens - 257 - 3))
  const refused = o.refused ?? null
  return {
    schema: NEEDLE_RECORD_SCHEMA,
    runId: `2026-01-01T00-00-00-000Z-${o.targetTokens}-d${o.depth}-r${o.repeat ?? 0}-${o.seed}`,
    startedAt: '2026-01-01T00:00:00.000Z',
    environment: o.env ?? ENV_A,
    invocationSeed: 7,
    seed: o.seed,
    repeat: o.repeat ?? 0,
    targetTokens: o.targetTokens,
    depth: o.depth,
    document: { promptTokens, positions: 'exact', charsPerToken: null, minDistance: 257, questionPosition: promptTokens - 2 },
    needles: [{ key: 0, marker: 'The secret word is', value: ' amber', depth: o.depth, position, distance: promptTokens - position }],
    asked: { key: 0, question: 'What is the secret word?' },
    expected: 'amber',
    answerBudget: { maxTokens: 300, belowMinimum: false },
    geometry: { fingerprint: GEOMETRY, source: 'front-door', store: GEOMETRY, sidecar: null, label: null, blockSize: 256 },
    ledger: { file: 'results/needle/ledger.json', unit: 'tokens', outcome: refused === null ? 'fresh' : 'reused-seed', reuses: refused === null ? [] : [{ label: 'needle seed 1', geometry: 'b'.repeat(64), sharedBlocks: 3, sameGeometry: false }], recorded: refused === null },
    refused,
    bridged: o.bridged,
    native: o.native,
  }
}

/** The fixture runs. */
export function fixtureRecords (): NeedleRunRecord[] {
  return [
    record({ targetTokens: 512, depth: 0, seed: 101, bridged: bridged('complete', true, 256), native: native(true) }),
    record({ targetTokens: 512, depth: 1, seed: 102, bridged: bridged('complete', true, 256), native: native(true) }),
    record({ targetTokens: 2048, depth: 0, seed: 103, bridged: bridged('complete', false, 1792), native: native(true) }),
    record({ targetTokens: 2048, depth: 1, seed: 104, bridged: bridged('partial 1024/2043', true, 1024), native: native(true) }),
    record({ targetTokens: 2048, depth: 1, seed: 105, repeat: 1, bridged: bridged('declined: short prompt (100 tokens < PD_MIN_TOKENS 512)', true, 0), native: native(false) }),
    record({ targetTokens: 4096, depth: 0, seed: 106, bridged: bridged('complete', true, 3840), native: native(true) }),
    record({ targetTokens: 4096, depth: 0, seed: 107, repeat: 1, bridged: bridged('complete', false, 3840), native: native(true) }),
    record({ targetTokens: 4096, depth: 1, seed: 108, bridged: null, native: null, refused: 'reused seed: the document shares its first 3 block(s) with "needle seed 1", cached under another geometry bbbbbbbbbbbbbbbb; use a fresh seed' }),
    record({ targetTokens: 512, depth: 0.5, seed: 109, position: 300, bridged: bridged('complete', true, 256), native: native(true) }),
    record({ env: ENV_B, targetTokens: 8192, depth: 0.5, seed: 201, bridged: bridged('declined: the decoder reported cached_tokens 0 | fewer than 7936', false, 0), native: native(true) }),
    record({ env: ENV_B, targetTokens: 8192, depth: 0.25, seed: 202, bridged: null, native: native(true) }),
  ]
}

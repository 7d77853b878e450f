// The gate on a real tiny deployment in a temporary directory: consistent, it passes every check
// and the hook matches the decoder bit for bit above the native window; each single mutation of
// one place fails with exactly the file and field of that place, and nothing else fails.
import { readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { NO_NEEDLE_EVIDENCE, renderReport, runGate, type GateReport } from '../../verify/gate/index.ts'
import { makeDeployment, type Deployment } from './helpers.ts'

let d: Deployment

beforeAll(async () => { d = await makeDeployment('gate') })
afterAll(async () => await d.cleanup())

function failures (r: GateReport): Array<[string | undefined, string | undefined]> {
  return r.findings.filter((f) => f.status === 'fail').map((f) => [f.file, f.field])
}

function failMessages (r: GateReport): string[] {
  return r.findings.filter((f) => f.status === 'fail').map((f) => f.message)
}

async function restoreSidecar (): Promise<void> {
  await d.exportSidecarFrom(() => {})
}

describe('a consistent deployment', () => {
  it('passes: identical tables in all four places, every limit, the store, and N/N bit-exact past the native window', async () => {
    const r = await runGate(d.options({ native: true, store: d.storeDir }))
    expect(failures(r)).toEqual([])
    expect(r.findings.filter((f) => f.status === 'warn')).toEqual([])
    expect(r.verdict.pass).toBe(true)
    for (const v of r.rope) expect(v.consensus).toEqual(['launch', 'prefill', 'sidecar', 'decoder'])
    expect(r.native).toMatchObject({ tokens: 1088, total: 32, identical: 32, summary: '32/32 bit-exact' })
    expect(r.findings.filter((f) => f.check === 'needle').map((f) => f.status)).toEqual(['pass'])
    const text = renderReport(r)
    expect(text).toMatch(/ok {3}native {4}32\/32 bit-exact on a 1,088-token prompt \(seed \d+\), past the native window 1,024/)
    expect(text.trimEnd().split('\n').at(-1)).toMatch(/^gate: PASS \(\d+ checks passed, 0 warning\(s\), 0 skipped\)$/)
  })

  it('draws a fresh seed each run unless one is given', async () => {
    const a = await runGate(d.options({ native: true, nativeTokens: 1030 }))
    const b = await runGate(d.options({ native: true, nativeTokens: 1030, seed: 7 }))
    expect(a.native!.seed).not.toBe(7)
    expect(b.native).toMatchObject({ seed: 7, tokens: 1030, summary: '32/32 bit-exact' })
  })
})

describe('the needle law', () => {
  it('fails a deployment that passes every other check when no needle evidence is given', async () => {
    const r = await runGate(d.options({ native: true, nativeTokens: 1030, needleRecords: undefined }))
    expect(r.findings.filter((f) => f.status === 'fail')).toEqual([{ check: 'needle', rule: 'needle-law', status: 'fail', message: NO_NEEDLE_EVIDENCE }])
    expect(NO_NEEDLE_EVIDENCE).toBe('no needle pass through the bridge above the native window; give --needle-url or --needle-record')
    expect(r.native!.summary).toBe('32/32 bit-exact')
    expect(r.verdict.line).toBe('gate: FAIL (1 failure(s); first: needle)')
    expect(renderReport(r)).toContain(`FAIL needle    ${NO_NEEDLE_EVIDENCE}`)
  })

  it('does not take the decoder alone as evidence', async () => {
    const r = await runGate(d.options({ needleRecords: undefined, needleNativeUrl: 'http://127.0.0.1:9' }))
    expect(failMessages(r)).toEqual([`${NO_NEEDLE_EVIDENCE} (--needle-native-url alone asks the decoder, not the bridge)`])
  })
})

describe('the bridge-vs-native prompt', () => {
  it('must go past the native window and stay inside every table', async () => {
    const short = await runGate(d.options({ native: true, nativeTokens: 1024 }))
    expect(short.findings.filter((f) => f.status === 'fail').map((f) => f.message)).toEqual(['a 1,024-token prompt does not go past the native window 1,024 (the shortest table covers 32,768 positions)'])
    const long = await runGate(d.options({ native: true, nativeTokens: 40000 }))
    expect(long.findings.filter((f) => f.status === 'fail').map((f) => f.message)).toEqual(['a 40,000-token prompt runs past the shortest table (32,768 positions: the decoder\'s, the sidecar\'s and the launch window\'s smallest)'])
  })
})

describe('the sidecar\'s YaRN factor (the seed\'s bug: exported under 16, the decoder runs 32)', () => {
  it('fails on the sidecar\'s factor for both compressed layer types, and the hook no longer matches the decoder', async () => {
    await d.exportSidecarFrom((json) => { json.rope_parameters.compress.factor = 16 })
    try {
      const r = await runGate(d.options({ native: true }))
      const file = join(d.sidecarDir, 'sidecar.json')
      expect(failures(r)).toEqual([
        [file, 'ropeParameters.compressed_sparse_attention.factor'],
        [file, 'ropeParameters.heavily_compressed_attention.factor'],
        [file, undefined],
      ])
      expect(failMessages(r)[0]).toMatch(/^is 16 \(sidecar\) but 32 in launch, prefill, decoder: the compressed_sparse_attention table first differs at position 1, pair \d+ /)
      // The stale sidecar is self-consistent: its own fingerprints pass; only comparisons catch it.
      expect(r.findings.find((f) => f.check === 'sidecar')?.status).toBe('pass')
      // Compressed layers (1, 2, 3) differ in window rows and pools; the sliding layer 0 (plain rope) does not.
      const names = r.native!.differing.map((x) => x.name)
      expect(names).toContain('native.layers.1.window')
      expect(names).toContain('native.layers.2.compressor.compressed_kv')
      expect(names).toContain('native.layers.3.indexer.compressed_kv')
      expect(names.filter((n) => n.startsWith('native.layers.0.'))).toEqual([])
      expect(r.native!.summary).toBe(`${32 - names.length}/32 bit-exact`)
      expect(failMessages(r)[2]).toMatch(/bit-exact on a 1,088-token prompt .*: the hook built from the sidecar does not compute the decoder's cache/)
    }
    finally {
      await restoreSidecar()
    }
  })
})

describe('the sidecar\'s max_position_embeddings', () => {
  it('fails on sidecar.json maxPositionEmbeddings, for every layer type\'s table', async () => {
    await d.exportSidecarFrom((json) => { json.max_position_embeddings = 16384 })
    try {
      const r = await runGate(d.options())
      expect(failures(r)).toEqual([[join(d.sidecarDir, 'sidecar.json'), 'maxPositionEmbeddings']])
      expect(failMessages(r)[0]).toBe('is 16,384 (sidecar) but 32,768 in launch, prefill, decoder: the sliding_attention and compressed_sparse_attention and heavily_compressed_attention tables first differ at position 16,384, pair 0 (position 16,384 is in decoder\'s table only (extent 16,384 vs 32,768))')
    }
    finally {
      await restoreSidecar()
    }
  })
})

describe('the decoder\'s rope theta', () => {
  it('fails on the decoder config.json\'s compress rope_theta, and only there', async () => {
    const original = await readFile(d.decoderConfig, 'utf8')
    const json = JSON.parse(original)
    json.rope_parameters.compress.rope_theta = 100000
    await writeFile(d.decoderConfig, JSON.stringify(json, null, 2))
    try {
      const r = await runGate(d.options())
      expect(failures(r)).toEqual([[d.decoderConfig, 'rope_parameters.compress.rope_theta']])
      expect(failMessages(r)[0]).toMatch(/^is 100,000 \(decoder\) but 160,000 in launch, prefill, sidecar: the compressed_sparse_attention and heavily_compressed_attention tables first differ at position 1, pair /)
      for (const v of r.rope.slice(1)) expect([v.consensus, v.outliers.map((o) => o.place)]).toEqual([['launch', 'prefill', 'sidecar'], ['decoder']])
    }
    finally {
      await writeFile(d.decoderConfig, original)
    }
  })

  it('the sliding layers\' top-level rope_theta is named as such', async () => {
    const original = await readFile(d.decoderConfig, 'utf8')
    const json = JSON.parse(original)
    json.rope_parameters.main.rope_theta = 20000
    await writeFile(d.decoderConfig, JSON.stringify(json, null, 2))
    try {
      const r = await runGate(d.options())
      expect(failures(r)).toEqual([[d.decoderConfig, 'rope_parameters.main.rope_theta']])
    }
    finally {
      await writeFile(d.decoderConfig, original)
    }
  })
})

describe('a launch factor', () => {
  it('fails on PD_ROPE_FACTOR in the launch file (and warns that factor x original is not the window)', async () => {
    await d.writeLaunch({ PD_ROPE_FACTOR: '16' })
    try {
      const r = await runGate(d.options())
      expect(failures(r)).toEqual([[d.launchFile, 'PD_ROPE_FACTOR']])
      expect(failMessages(r)[0]).toMatch(/^is 16 \(launch\) but 32 in prefill, sidecar, decoder: the compressed_sparse_attention and heavily_compressed_attention tables first differ at position 1, pair \d+ .*; the angle error first exceeds 0\.1 rad at position [\d,]+ \(pair \d+/)
      expect(r.findings.filter((f) => f.status === 'warn').map((f) => [f.rule, f.field])).toEqual([['yarn-window', 'PD_ROPE_FACTOR']])
    }
    finally {
      await d.writeLaunch()
    }
  })

  it('a launch window that is not the files\' extent fails on PD_MAX_MODEL_LEN', async () => {
    await d.writeLaunch({ PD_MAX_MODEL_LEN: '16384', PD_MAX_BRIDGE_TOKENS: '16000', PD_ROPE_FACTOR: '16', PD_DECODER_MAX_CONTEXT: undefined, PD_PREFILL_MAX_MODEL_LEN: undefined })
    try {
      const r = await runGate(d.options())
      expect(failures(r)).toEqual([[d.launchFile, 'PD_MAX_MODEL_LEN'], [d.launchFile, 'PD_ROPE_FACTOR']])
    }
    finally {
      await d.writeLaunch()
    }
  })
})

describe('a too-small answer budget', () => {
  it('fails on PD_DEFAULT_MAX_TOKENS below PD_MIN_ANSWER_TOKENS (the seed\'s 48-token needle budget)', async () => {
    await d.writeLaunch({ PD_DEFAULT_MAX_TOKENS: '48' })
    try {
      const r = await runGate(d.options())
      expect(failures(r)).toEqual([[d.launchFile, 'PD_DEFAULT_MAX_TOKENS']])
      expect(failMessages(r)[0]).toBe('is 48, below PD_MIN_ANSWER_TOKENS 256: a model that reasons first returns empty content and a retrieval reads as a MISS (the seed\'s 48-token needle budget)')
    }
    finally {
      await d.writeLaunch()
    }
  })

  it('fails when max length minus prompt length clamps every long answer to one token', async () => {
    await d.writeLaunch({ PD_MAX_BRIDGE_TOKENS: '32767' })
    try {
      const r = await runGate(d.options())
      expect(failures(r)).toEqual([[d.launchFile, 'PD_MAX_BRIDGE_TOKENS']])
      expect(failMessages(r)[0]).toBe('the longest bridged prompt is 32,767 tokens and PD_DECODER_MAX_CONTEXT is 32,768: every answer to a prompt of 32,767 tokens or more is clamped to one token (max length minus prompt length); keep PD_MAX_BRIDGE_TOKENS <= 32,512 so every answer gets PD_MIN_ANSWER_TOKENS 256')
    }
    finally {
      await d.writeLaunch()
    }
  })

  it('without a bridge cap the longest prompt is the window minus one, and the same clamp fails', async () => {
    await d.writeLaunch({ PD_MAX_BRIDGE_TOKENS: undefined })
    try {
      const r = await runGate(d.options())
      expect(failures(r)).toEqual([[d.launchFile, 'PD_MAX_BRIDGE_TOKENS']])
      expect(failMessages(r)[0]).toMatch(/^the longest bridged prompt is 32,767 tokens \(no PD_MAX_BRIDGE_TOKENS: the window minus one\) and .* clamped to one token/)
    }
    finally {
      await d.writeLaunch()
    }
  })
})

describe('a too-small capture budget', () => {
  it('fails on PD_CAPTURE_BUDGET_BYTES, saying how far a capture gets', async () => {
    await d.writeLaunch({ PD_CAPTURE_BUDGET_BYTES: '10000000' })
    try {
      const r = await runGate(d.options())
      expect(failures(r)).toEqual([[d.launchFile, 'PD_CAPTURE_BUDGET_BYTES']])
      expect(failMessages(r)[0]).toMatch(/^is 10,000,000 bytes, but a capture of the longest bridged prompt \(32,000 tokens\) holds 55,444,480 bytes \(1732\.6 bytes\/token\): captures past about [\d,]+ tokens seal a partial prefix/)
    }
    finally {
      await d.writeLaunch()
    }
  })
})

describe('places that cannot be read', () => {
  it('are failures naming the file and field, and the rest of the gate still runs', async () => {
    const original = await readFile(d.prefillConfig, 'utf8')
    await writeFile(d.prefillConfig, original.replace('"hidden_size": 256', '"hidden_size": "256"'))
    try {
      const r = await runGate(d.options({ sidecar: join(d.root, 'no-such-sidecar') }))
      const f = r.findings.filter((x) => x.status === 'fail')
      expect(f.map((x) => [x.check, x.file, x.field])).toEqual([
        ['places', d.prefillConfig, 'hidden_size'],
        ['places', join(d.root, 'no-such-sidecar', 'sidecar.json'), '(file)'],
        ['needle', undefined, undefined],
      ])
      expect(f[1].message).toBe('cannot be read: ENOENT')
      // Without the sidecar's fingerprint no needle run can be tied to this deployment's geometry.
      expect(f[2].message).toBe('cannot be judged: the decoder\'s geometry (its config.json and profile) and the sidecar\'s fingerprint are needed, and one of them could not be read')
      // The launch parameters inherit from the decoder's config when the prefill node's is unreadable.
      expect(r.rope.map((v) => v.consensus)).toEqual([['launch', 'decoder'], ['launch', 'decoder'], ['launch', 'decoder']])
    }
    finally {
      await writeFile(d.prefillConfig, original)
    }
  })
})

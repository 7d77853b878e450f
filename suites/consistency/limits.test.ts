// Stale limits: each rule against the window, on the tiny deployment, and the two byte counts the
// rules rest on checked against the real thing: the store-size rule's block bytes against blocks the
// decoder writes, the capture-budget rule's bytes against a real capture session.
import { mkdir, stat, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CaptureSession, loadSidecar } from '../../src/capture/index.ts'
import { DecoderPrefixCache } from '../../src/decode/prefix-cache/index.ts'
import { blockPath } from '../../src/decode/store/index.ts'
import { SafetensorsFile } from '../../src/formats/safetensors/index.ts'
import { loadCheckpoint } from '../../src/model/checkpoint/index.ts'
import { DeepseekV4Engine } from '../../src/model/engine/index.ts'
import { blockDataBytes, blockHeaderAllowance, captureBytes, readSidecarPlace, runGate, seededPrompt, type GateReport } from '../../verify/gate/index.ts'
import { makeDeployment, type Deployment } from './helpers.ts'

let d: Deployment
let engine: DeepseekV4Engine

beforeAll(async () => {
  d = await makeDeployment('limits')
  engine = DeepseekV4Engine.fromCheckpoint(await loadCheckpoint(d.modelDir), 'decoder')
})
afterAll(async () => await d.cleanup())

function failing (r: GateReport): Array<[string | undefined, string | undefined, string]> {
  return r.findings.filter((f) => f.status === 'fail').map((f) => [f.file, f.field, f.message])
}

async function gateWith (changes: Record<string, string | undefined>): Promise<GateReport> {
  await d.writeLaunch(changes)
  try {
    return await runGate(d.options())
  }
  finally {
    await d.writeLaunch()
  }
}

describe('the store-size rule counts the bytes the decoder\'s blocks really take', () => {
  it.each([256, 100])('block size %i: every block\'s tensor data equals the count, and its header fits the allowance', async (blockSize) => {
    const root = join(d.root, `store-bytes-${blockSize}`)
    const pc = await DecoderPrefixCache.open({ storeRoot: root, modelName: 'm', cfg: engine.config, profile: 'decoder', blockSize, log: () => {} })
    const tokens = seededPrompt(11, 3 * blockSize + 5, 512)
    const stored = await pc.prefillAndStore(engine, tokens)
    expect(stored.storedBlocks).toHaveLength(3)
    const sidecar = await readSidecarPlace(d.sidecarDir)
    for (const [k, b] of stored.storedBlocks.entries()) {
      const path = blockPath(root, b.hash)
      const f = await SafetensorsFile.open(path)
      try {
        const data = [...f.tensors.values()].reduce((a, t) => a + (t.end - t.begin), 0)
        expect(data).toBe(blockDataBytes(sidecar.json, blockSize, k, 2))
        const fileBytes = (await stat(path)).size
        expect(fileBytes).toBe(b.bytes)
        expect(fileBytes - data).toBeLessThanOrEqual(blockHeaderAllowance(sidecar.json))
      }
      finally {
        await f.close()
      }
    }
  })
})

describe('the capture-budget rule counts what a capture session holds', () => {
  it('a session with exactly the rule\'s bytes completes; with half of them it seals a partial prefix', async () => {
    const sidecar = await loadSidecar(d.sidecarDir)
    const place = await readSidecarPlace(d.sidecarDir)
    const tokens = seededPrompt(5, 1100, 512)
    const need = captureBytes(place, tokens.length)
    await mkdir(join(d.root, 'captures'), { recursive: true })
    const run = async (budget: number, id: string) => {
      const session = await CaptureSession.start({ sidecar, captureRoot: join(d.root, 'captures'), requestId: id, tokenCount: tokens.length, memoryBudgetBytes: budget })
      engine.prefill(tokens, engine.newCache(), { logits: 'none', maxChunk: 256, attnInputHook: session.onAttentionInput })
      const manifest = await session.finish()
      return { state: manifest.state, peak: session.peakHeldBytes }
    }
    const full = await run(need, 'full')
    expect(full.state).toBe('done')
    expect(full.peak).toBeLessThanOrEqual(need)
    expect((await run(Math.floor(need / 2), 'half')).state).toBe('partial')
  })
})

describe('each limit sized against the window', () => {
  it('the prefill engine\'s max length: below the bridge cap, or past its config\'s tables', async () => {
    expect(failing(await gateWith({ PD_PREFILL_MAX_MODEL_LEN: '16384' }))).toEqual([[d.launchFile, 'PD_PREFILL_MAX_MODEL_LEN',
      'is 16,384, below the longest bridged prompt 32,000: the prefill engine refuses prompts the front door sends it (stale: sized against an older window?)']])
    expect(failing(await gateWith({ PD_PREFILL_MAX_MODEL_LEN: '65536' }))).toEqual([[d.launchFile, 'PD_PREFILL_MAX_MODEL_LEN',
      `is 65,536, past the prefill config's max_position_embeddings 32,768 (${d.prefillConfig})`]])
  })

  it('the batched-token budget must hold a whole prompt only when chunked prefill is off', async () => {
    expect(failing(await gateWith({ PD_PREFILL_CHUNKED: '0' }))).toEqual([[d.launchFile, 'PD_PREFILL_MAX_BATCHED_TOKENS',
      'is 512 with chunked prefill off (PD_PREFILL_CHUNKED): a prompt must fit one batch, and the longest bridged prompt is 32,000']])
    expect(failing(await gateWith({ PD_PREFILL_CHUNKED: '0', PD_PREFILL_MAX_BATCHED_TOKENS: '32768' }))).toEqual([])
  })

  it('the decoder\'s max context: below the window, or past its config\'s tables', async () => {
    const r = await gateWith({ PD_DECODER_MAX_CONTEXT: '16384' })
    expect(failing(r).map((f) => f.slice(0, 2))).toEqual([[d.launchFile, 'PD_DECODER_MAX_CONTEXT'], [d.launchFile, 'PD_MAX_BRIDGE_TOKENS']])
    expect(failing(r)[0][2]).toBe('is 16,384, below the window 32,768: the decoder cannot hold a full-window request (stale: sized against an older window?)')
    expect(failing(await gateWith({ PD_DECODER_MAX_CONTEXT: '40000' })).map((f) => f.slice(0, 2))).toEqual([[d.launchFile, 'PD_DECODER_MAX_CONTEXT']])
  })

  it('the store size: one full window of blocks must fit', async () => {
    const r = await gateWith({ PD_STORE_MAX_BYTES: '20000000' })
    expect(failing(r)).toEqual([[d.launchFile, 'PD_STORE_MAX_BYTES',
      'is 20,000,000 bytes, but one full window is 128 blocks of 256 tokens, 29,444,096 bytes (27,346,944 of tensor data plus header allowance): the store evicts a long prompt\'s first blocks while writing its last']])
  })

  it('stage deadlines that contain the prefill: at least the full-window prefill time times the margin', async () => {
    const r = await gateWith({ PD_DEADLINE_CAPTURE_MS: '20000', PD_DEADLINE_SUBMIT_MS: '100' })
    expect(failing(r)).toEqual([[d.launchFile, 'PD_DEADLINE_CAPTURE_MS',
      'is 20,000 ms, but prefilling the full window (32,768 tokens at PD_PREFILL_TOKENS_PER_S 2000) takes about 16,384 ms; with PD_DEADLINE_MARGIN 1.5 it must be at least 24,576 ms, or full-window requests time out and fall back']])
    // The submit stage holds no prefill: listed, not checked.
    expect(r.findings.find((f) => f.field === 'PD_DEADLINE_SUBMIT_MS')?.status).toBe('skip')
    const unmeasured = await gateWith({ PD_PREFILL_TOKENS_PER_S: undefined })
    expect(unmeasured.findings.filter((f) => f.status === 'warn').map((f) => f.field)).toEqual(['PD_PREFILL_TOKENS_PER_S'])
  })

  it('the block size: the sidecar\'s must be the store\'s', async () => {
    expect(failing(await gateWith({ PD_BLOCK_SIZE: '2048' })).map((f) => f.slice(0, 2))).toEqual([[join(d.sidecarDir, 'sidecar.json'), 'blockSize']])
  })

  it('the bridge cap: past the window fails; at or under the native window, or far below the window, warns', async () => {
    // Past the window: the cap itself, the prefill engine's max length below it, and the answer clamp.
    expect(failing(await gateWith({ PD_MAX_BRIDGE_TOKENS: '40000' })).map((f) => f[1])).toEqual(['PD_MAX_BRIDGE_TOKENS', 'PD_PREFILL_MAX_MODEL_LEN', 'PD_MAX_BRIDGE_TOKENS'])
    const low = await gateWith({ PD_MAX_BRIDGE_TOKENS: '1000' })
    expect(failing(low)).toEqual([])
    expect(low.findings.filter((f) => f.status === 'warn').map((f) => f.message)).toEqual([
      'is 1,000, at or below the native window 1,024: the bridge never runs where the window change matters, and the window\'s top is served natively only',
    ])
    const stale = await gateWith({ PD_MAX_BRIDGE_TOKENS: '16384' })
    expect(stale.findings.filter((f) => f.status === 'warn').map((f) => f.message)).toEqual([
      'is 16,384: prompts of 16,385..31,744 tokens fit the window with a full answer but take the native path (sized against an older window, or your measured headroom?)',
    ])
  })

  it('an unknown PD_ key is a warning naming it, not a failure', async () => {
    const r = await gateWith({ PD_ROPE_FACTR: '16' })
    expect(failing(r)).toEqual([])
    expect(r.findings.filter((f) => f.status === 'warn').map((f) => [f.field, f.message])).toEqual([['PD_ROPE_FACTR', 'is not a launch key the gate knows (a typo?); it was ignored']])
  })
})

describe('the front door\'s deployment config (--config)', () => {
  it('supplies the paths and its values; a value the launch file sets otherwise fails naming both', async () => {
    const config = join(d.root, 'front.json')
    await writeFile(config, JSON.stringify({
      decoder: { url: 'http://127.0.0.1:8011', model: d.modelDir, cacheDir: d.storeDir, blockSize: 256, profile: 'decoder' },
      sidecar: d.sidecarDir,
      routing: { maxBridgeTokens: 20000 },
      deadlines: { captureMs: 10000 },
    }))
    await d.writeLaunch({ PD_MAX_BRIDGE_TOKENS: undefined, PD_DEADLINE_CAPTURE_MS: undefined })
    try {
      const r = await runGate({ launch: d.launchFile, prefillConfig: d.prefillConfig, config, native: false, needleRecords: d.needleEvidence() })
      expect(r.places.sidecar?.file).toBe(join(d.sidecarDir, 'sidecar.json'))
      expect(r.places.decoder?.file).toBe(d.decoderConfig)
      expect(r.findings.filter((f) => f.check === 'store').map((f) => f.status)).toEqual(['pass'])
      // Values from the config are named by the config's file and field.
      expect(failing(r).map((f) => f.slice(0, 2))).toEqual([[config, 'deadlines.captureMs']])
      expect(r.findings.find((f) => f.rule === 'bridge-cap')).toMatchObject({ file: config, field: 'routing.maxBridgeTokens', status: 'warn' })
      await d.writeLaunch({ PD_DEADLINE_CAPTURE_MS: undefined })
      const clash = await runGate({ launch: d.launchFile, prefillConfig: d.prefillConfig, config, native: false, needleRecords: d.needleEvidence() })
      expect(failing(clash)[0]).toEqual([config, 'routing.maxBridgeTokens', `is 20000, but PD_MAX_BRIDGE_TOKENS is 32000 in ${d.launchFile}: the deployment config and the launch parameters disagree`])
    }
    finally {
      await d.writeLaunch()
    }
  })
})

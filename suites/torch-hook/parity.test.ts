// The torch capture hook (src/engines/torch/, run by Debian's CPU torch as a child process) against
// the TypeScript capture hook, on identical attention inputs: the decoder's own prefill of the tiny
// checkpoint, a decoder-profile sidecar with 256-token blocks. Per layer file and per tensor it
// reports the identical fraction and the ulp histogram, one-shot and for several chunkings, and
// requires the files to be byte-identical (bit-exact caches, the same safetensors layout, the same
// boundary snapshots). Then the budget: the same budget seals the same prefix on both sides.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { CaptureSession, exportWeights, readCapture, type Sidecar } from '../../src/capture/index.ts'
import { readManifest } from '../../src/wire/manifest.ts'
import { serializeSafetensors, tensorFrom, type Tensor } from '../../src/formats/safetensors/index.ts'
import { DeepseekV4Engine } from '../../src/model/engine/index.ts'
import { fixtureTokens, nativeRun, replay, seeded, tinySetup, type TinySetup } from '../capture/helpers.ts'
import { compareCaptures } from './compare.ts'
import { runTorchHook, torchAvailability, TORCH_PYTHON } from './python.ts'

const T = 1100
const BLOCK_SIZE = 256
const torch = torchAvailability()
const inCi = process.env.CI !== undefined && process.env.CI !== ''

if (!torch.ok && !inCi) {
  console.warn(`\n*** suites/torch-hook SKIPPED: ${torch.why}.\n*** Install Debian's CPU torch: apt-get install -y python3-torch python3-numpy (CI installs it and fails without it).\n`)
}

describe('torch is there to test against', () => {
  it.skipIf(!torch.ok && !inCi)(`${TORCH_PYTHON} imports torch and numpy`, () => {
    if (!torch.ok) throw new Error(`suites/torch-hook needs Debian's python3-torch under ${TORCH_PYTHON}: ${torch.why}`)
    console.log(`torch ${torch.version} under ${TORCH_PYTHON}`)
  })
})

/** Seeded random chunk sizes in [1, 300] adding up to `total`. */
function randomChunks (total: number, seed: number): number[] {
  const next = seeded(seed)
  const sizes: number[] = []
  for (let left = total; left > 0;) {
    const s = Math.min(left, 1 + Math.floor(next() * 300))
    sizes.push(s)
    left -= s
  }
  return sizes
}

describe.skipIf(!torch.ok)('torch hook == TypeScript hook on identical attention inputs', () => {
  let setup: TinySetup
  let sidecar: Sidecar
  let sidecarDir: string
  let inputsFile: string
  let tokensFile: string
  let inputs: Float32Array[]
  let hidden: number
  const tokens = fixtureTokens(T)

  beforeAll(async () => {
    setup = await tinySetup('torch-hook')
    sidecarDir = join(setup.root, 'sidecar-decoder')
    sidecar = await exportWeights({ model: setup.ckptDir, profile: 'decoder', out: sidecarDir, blockSize: BLOCK_SIZE })
    const engine = DeepseekV4Engine.fromCheckpoint(setup.ckpt, 'decoder')
    hidden = engine.config.hiddenSize
    inputs = nativeRun(engine, tokens).inputs
    const tensors = new Map<string, Tensor>(inputs.map((x, i) => [`oneshot.layers.${i}.attn_input`, tensorFrom('F32', [T, hidden], x)]))
    inputsFile = join(setup.root, 'attn-inputs.safetensors')
    writeFileSync(inputsFile, serializeSafetensors(tensors))
    tokensFile = join(setup.root, 'tokens.json')
    writeFileSync(tokensFile, JSON.stringify(tokens))
    mkdirSync(join(setup.root, 'ts'))
    mkdirSync(join(setup.root, 'torch'))
  })
  afterAll(() => setup?.dispose())

  async function tsCapture (id: string, chunk: number, memoryBudgetBytes?: number): Promise<string> {
    const session = await CaptureSession.start({ sidecar, captureRoot: join(setup.root, 'ts'), requestId: id, tokenCount: T, tokens, memoryBudgetBytes })
    replay(inputs, hidden, chunk, session.onAttentionInput)
    await session.finish()
    return session.dir
  }

  function torchCapture (id: string, chunks: string, budget?: number, extra: string[] = []): { dir: string, peakHeldBytes: number } {
    const args = ['--sidecar', sidecarDir, '--attn-inputs', inputsFile, '--capture-root', join(setup.root, 'torch'), '--request-id', id, '--tokens', tokensFile, '--chunks', chunks, ...extra]
    if (budget !== undefined) args.push('--budget', String(budget))
    const r = runTorchHook(args)
    console.log(`torch hook ${id} (chunks ${chunks.length > 40 ? chunks.slice(0, 40) + '...' : chunks}): ${r.state} ${r.sealedLength}/${T} in ${r.seconds.toFixed(1)} s`)
    return { dir: join(setup.root, 'torch', id), peakHeldBytes: r.peakHeldBytes }
  }

  // The reference every torch capture is held to (the TypeScript hook is chunk-invariant: suites/bitexact).
  let tsOneShot: string
  beforeAll(async () => {
    tsOneShot = await tsCapture('oneshot', T)
  })

  it('one-shot: every layer file byte-identical, every tensor 100% identical', async () => {
    const { dir } = torchCapture('oneshot', 'whole')
    const r = await compareCaptures('one-shot', dir, tsOneShot)
    expect(r.distances.filter((d) => d.mismatch !== undefined || d.identical !== d.elements).map((d) => d.name)).toEqual([])
    expect(r.identicalFiles).toBe(r.files)
    // The files are the whole capture: the manifest lists the same bytes and digests, and the TypeScript reader accepts it.
    const ours = await readManifest(dir)
    const ref = await readManifest(tsOneShot)
    expect({ ...ours, createdAt: '', updatedAt: '', timings: {} }).toEqual({ ...ref, createdAt: '', updatedAt: '', timings: {} })
    const read = await readCapture(dir, { request: { requestId: 'oneshot', tokenCount: T, sidecarFingerprint: sidecar.fingerprint } })
    expect(read.tensors.size).toBeGreaterThan(0)
  })

  const chunkings: Array<[string, string]> = [
    ['chunks of 128 (a forward with maxChunk 128)', '128'],
    ['chunks of 7 (no chunk aligned to anything)', '7'],
    ['seeded random chunks (seed 16)', randomChunks(T, 16).join(',')],
    ['seeded random chunks (seed 1617)', randomChunks(T, 1617).join(',')],
  ]
  it.each(chunkings)('%s: the same bytes as the TypeScript hook one-shot', async (label, spec) => {
    const id = `chunks-${label.replace(/[^a-z0-9]+/gi, '-').replace(/-+$/, '')}`
    const { dir } = torchCapture(id, spec)
    const r = await compareCaptures(label, dir, tsOneShot)
    expect(r.distances.filter((d) => d.mismatch !== undefined || d.identical !== d.elements).map((d) => d.name)).toEqual([])
    expect(r.identicalFiles).toBe(r.files)
  })

  it('a memory budget seals the same prefix on both sides, under the budget, with the same files', async () => {
    // The sum of every layer's cache at about 300 tokens, replayed in chunks of 128: the TypeScript session seals a partial prefix.
    const budget = 700_000
    const tsDir = await tsCapture('budget', 128, budget)
    const tsManifest = await readManifest(tsDir)
    expect(tsManifest.state).toBe('partial')
    const { dir, peakHeldBytes } = torchCapture('budget', '128', budget)
    const ours = await readManifest(dir)
    console.log(`budget ${budget} B, chunks of 128: TypeScript ${tsManifest.state} ${tsManifest.sealedLength}/${T}, torch ${ours.state} ${ours.sealedLength}/${T}, torch peak held ${peakHeldBytes} B`)
    expect(ours.state).toBe('partial')
    expect(ours.sealedLength).toBe(tsManifest.sealedLength)
    expect(peakHeldBytes).toBeLessThanOrEqual(budget)
    const r = await compareCaptures('budget prefix', dir, tsDir)
    expect(r.identicalFiles).toBe(r.files)
  })

  it.each([['whole'], ['128']])('through attach() (pre-hooks on layers[i].self_attn of a stand-in model), chunks %s: the same bytes', async (spec) => {
    const { dir } = torchCapture(`attach-${spec}`, spec, undefined, ['--via-attach'])
    const r = await compareCaptures(`attach(), chunks ${spec}`, dir, tsOneShot)
    expect(r.identicalFiles).toBe(r.files)
  })

  it('the comparison sees another order: torch.matmul (BLAS, fp32) for the projections, measured', async () => {
    // Not the profile's accumulation order: what an unmodified torch projection would give. The
    // distances are printed; the files must differ (else this comparison could not see anything).
    const { dir } = torchCapture('blas', 'whole', undefined, ['--matmul', 'blas'])
    const r = await compareCaptures('torch.matmul projections (not the lanes8 order)', dir, tsOneShot)
    const floats = r.distances.filter((d) => d.dtype !== 'I64' && d.elements > 0)
    const identical = floats.reduce((s, d) => s + d.identical, 0)
    const elements = floats.reduce((s, d) => s + d.elements, 0)
    console.log(`BLAS order: ${identical}/${elements} float elements identical (${(100 * identical / elements).toFixed(3)}%), worst ${Math.max(...floats.map((d) => d.worstUlps))} bf16 ulp`)
    expect(r.identicalFiles).toBeLessThan(r.files)
    expect(identical).toBeLessThan(elements)
  })
})

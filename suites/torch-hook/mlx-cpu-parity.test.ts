// The torch hook's mlx-cpu cache math (src/engines/torch/pd_torch_hook/mlx_*.py, run by Debian's CPU
// torch as a child process) against the TypeScript hook's (src/capture/mlx-cpu, itself bit for bit
// MLX 0.32.2's CPU: suites/mlx), on identical attention inputs, with an mlx-cpu sidecar: every layer
// file byte-identical, every array 100 % identical, one-shot and chunked. The tiny preset runs past
// its native window (T = 1100 > YaRN's original 1024); the flash-schedule preset (43 layers, V4-Flash's
// CSA/HCA schedule) a second checkpoint. One rounding point changed in the torch hook alone must make
// the files differ, and a hook asked for another cache math than the sidecar's is refused.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import { CaptureSession, exportWeights, type Sidecar } from '../../src/capture/index.ts'
import { deepseekV4RopeFreqs, fma32, mlxCos, mlxExp, mlxSin } from '../../src/numerics/mlx-cpu/index.ts'
import { HANG_LIMIT_MS } from '../support/hang-limit.ts'
import { loadCheckpoint, makeCheckpoint } from '../../src/model/checkpoint/index.ts'
import { serializeSafetensors, tensorFrom, type Tensor } from '../../src/formats/safetensors/index.ts'
import { DeepseekV4Engine } from '../../src/model/engine/index.ts'
import { fixtureTokens, nativeRun, replay, tinySetup, type TinySetup } from '../capture/helpers.ts'
import { compareCaptures, differingTensors } from './compare.ts'
import { runTorchHook, runTorchHookFailure, torchAvailability, TORCH_PYTHON } from './python.ts'

const torch = torchAvailability()

const DIGESTS = fileURLToPath(new URL('./mlx_numerics_digests.py', import.meta.url))

function sha256 (a: Float32Array): string {
  return createHash('sha256').update(new Uint8Array(a.buffer, a.byteOffset, a.byteLength)).digest('hex')
}

describe.skipIf(!torch.ok)('the torch hook\'s MLX element-wise ports == the TypeScript ports (which suites/mlx pins to MLX\'s own outputs)', () => {
  it('Cephes exp, sin, cos on 100,001 inputs, the rope freqs, fma32 where a double fma would round twice: the same bits', () => {
    const py = JSON.parse(execFileSync(TORCH_PYTHON, [DIGESTS], { encoding: 'utf8', timeout: HANG_LIMIT_MS })) as { exp: string, sin: string, cos: string, freqs: string[], fma: number[] }
    const n = 100_001
    const xe = new Float32Array(n)
    const xs = new Float32Array(n)
    for (let i = 0; i < n; i++) { xe[i] = (i - 50000) * 0.0019; xs[i] = (i - 50000) * 0.013 }
    const yarn = { factor: 32, originalMaxPositionEmbeddings: 1024, betaFast: 32, betaSlow: 1 }
    const a = 1 + 2 ** -12
    expect(py).toEqual({
      exp: sha256(xe.map(mlxExp)),
      sin: sha256(xs.map(mlxSin)),
      cos: sha256(xs.map(mlxCos)),
      freqs: [deepseekV4RopeFreqs(64, 10000, null, 1, 128), deepseekV4RopeFreqs(64, 160000, yarn, 1, 128),
        deepseekV4RopeFreqs(64, 160000, yarn, 4, 128), deepseekV4RopeFreqs(64, 160000, yarn, 128, 128)].map(sha256),
      fma: [fma32(a, a, 2 ** -60), fma32(a, a, -(2 ** -60)), fma32(a, -a, 2 ** -60)],
    })
  })
})

/** One checkpoint's attention inputs, an mlx-cpu sidecar, and the TypeScript hook's one-shot capture. */
interface Case {
  root: string
  sidecar: Sidecar
  sidecarDir: string
  inputsFile: string
  tokensFile: string
  T: number
  tsOneShot: string
}

async function prepare (root: string, model: string, T: number, blockSize: number): Promise<Case> {
  const sidecarDir = join(root, 'sidecar-mlx-cpu')
  const sidecar = await exportWeights({ model, profile: 'decoder', out: sidecarDir, blockSize, cacheMath: 'mlx-cpu' })
  const engine = DeepseekV4Engine.fromCheckpoint(await loadCheckpoint(model), 'decoder')
  const hidden = engine.config.hiddenSize
  const tokens = fixtureTokens(T)
  const { inputs } = nativeRun(engine, tokens)
  const tensors = new Map<string, Tensor>(inputs.map((x, i) => [`oneshot.layers.${i}.attn_input`, tensorFrom('F32', [T, hidden], x)]))
  const inputsFile = join(root, 'attn-inputs.safetensors')
  writeFileSync(inputsFile, serializeSafetensors(tensors))
  const tokensFile = join(root, 'tokens.json')
  writeFileSync(tokensFile, JSON.stringify(tokens))
  mkdirSync(join(root, 'ts'))
  mkdirSync(join(root, 'torch'))
  const session = await CaptureSession.start({ sidecar, captureRoot: join(root, 'ts'), requestId: 'oneshot', tokenCount: T, tokens })
  replay(inputs, hidden, T, session.onAttentionInput)
  await session.finish()
  return { root, sidecar, sidecarDir, inputsFile, tokensFile, T, tsOneShot: session.dir }
}

function torchArgs (c: Case, id: string, chunks: string, extra: string[] = []): string[] {
  return ['--sidecar', c.sidecarDir, '--attn-inputs', c.inputsFile, '--capture-root', join(c.root, 'torch'), '--request-id', id,
    '--tokens', c.tokensFile, '--chunks', chunks, ...extra]
}

function torchCapture (c: Case, id: string, chunks: string, extra: string[] = []): string {
  const r = runTorchHook(torchArgs(c, id, chunks, extra))
  console.log(`torch hook (mlx-cpu) ${id}, chunks ${chunks}: ${r.state} ${r.sealedLength}/${c.T} in ${r.seconds.toFixed(1)} s`)
  return join(c.root, 'torch', id)
}

describe.skipIf(!torch.ok)('torch hook mlx-cpu == TypeScript hook mlx-cpu, tiny preset past its native window (T = 1100)', () => {
  let setup: TinySetup
  let c: Case
  beforeAll(async () => {
    setup = await tinySetup('torch-hook-mlx')
    c = await prepare(setup.root, setup.ckptDir, 1100, 256)
  })
  afterAll(() => setup?.dispose())

  it.each([['whole'], ['37,300,1,500,262']])('chunks %s: every layer file byte-identical, every array identical', async (spec) => {
    const dir = torchCapture(c, `chunks-${spec.replace(/,/g, '-')}`, spec)
    const r = await compareCaptures(`mlx-cpu, chunks ${spec}`, dir, c.tsOneShot)
    expect(differingTensors(r)).toEqual([])
    expect(r.identicalFiles).toBe(r.files)
    expect(r.distances.length).toBeGreaterThan(0)
  })

  // One point here (the others tried make the files differ too: docs/torch-rung.md, "The mlx-cpu cache math").
  it.each([['pooling.sum=f32']])(
    'one rounding point changed in the torch hook alone (%s): the comparison sees it', async (mutation) => {
      const dir = torchCapture(c, `mutated-${mutation.replace(/[^a-z0-9]+/gi, '-')}`, 'whole', ['--mutate-rounding', mutation])
      const r = await compareCaptures(`mlx-cpu with ${mutation}`, dir, c.tsOneShot)
      expect(r.identicalFiles).toBeLessThan(r.files)
      expect(differingTensors(r).length).toBeGreaterThan(0)
    })

  it('a hook asked for another cache math than the sidecar\'s is refused before any work, with the reason', () => {
    const err = runTorchHookFailure(torchArgs(c, 'asked-decoder', 'whole', ['--cache-math', 'decoder']))
    expect(err).toMatch(/exported for the mlx-cpu cache math, this hook was asked for decoder/)
    const blas = runTorchHookFailure(torchArgs(c, 'blas', 'whole', ['--matmul', 'blas']))
    expect(blas).toMatch(/the mlx-cpu cache math has one order/)
  })
})

describe.skipIf(!torch.ok)('torch hook mlx-cpu == TypeScript hook mlx-cpu, flash-schedule preset (43 layers, T = 301)', () => {
  let setup: TinySetup
  let c: Case
  beforeAll(async () => {
    setup = await tinySetup('torch-hook-mlx-flash')
    const model = join(setup.root, 'flash-schedule')
    await makeCheckpoint({ preset: 'flash-schedule', seed: 1, out: model })
    c = await prepare(setup.root, model, 301, 128)
  })
  afterAll(() => setup?.dispose())

  it('one-shot: every layer file byte-identical, every array identical (chunking is the tiny case\'s)', async () => {
    const dir = torchCapture(c, 'oneshot', 'whole')
    const r = await compareCaptures('flash-schedule mlx-cpu, one-shot', dir, c.tsOneShot)
    expect(differingTensors(r)).toEqual([])
    expect(r.identicalFiles).toBe(r.files)
    expect(r.files).toBe(43)
  })
})

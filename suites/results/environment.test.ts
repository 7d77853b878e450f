import { createHash } from 'node:crypto'
import os from 'node:os'
import { describe, expect, it } from 'vitest'
import { describeEnvironment, embeddedConfigFingerprint, embeddedEnvironment, embeddedModelLabel, embeddedModelName, gitCommit, machineLine } from '../../verify/results/environment.ts'

describe('the environment id', () => {
  it('is what cold-bench computed before the builder was shared (committed records keep their id)', () => {
    // The formula cold-bench.mjs used inline, written out: sha256 of the machine and config fields in this order.
    const base = {
      cpu: os.cpus()[0]?.model ?? 'unknown',
      cores: os.cpus().length,
      memoryBytes: os.totalmem(),
      node: process.version,
      os: `${os.platform()} ${os.release()} ${os.arch()}`,
      configFingerprint: 'cfg-x',
      model: 'embedded tiny (seed 1, blocks of 256)',
    }
    const legacy = `env-${createHash('sha256').update(JSON.stringify(base)).digest('hex').slice(0, 12)}`
    const env = describeEnvironment({ configFingerprint: 'cfg-x', model: 'embedded tiny (seed 1, blocks of 256)', commit: 'abc1234' })
    expect(env).toEqual({ id: legacy, ...base, commit: 'abc1234' })
  })

  it('leaves the commit out and takes the config and model in', () => {
    const id = (configFingerprint: string, model: string, commit: string) => describeEnvironment({ configFingerprint, model, commit }).id
    expect(id('c', 'm', 'one')).toBe(id('c', 'm', 'two'))
    expect(id('c', 'm', 'one')).not.toBe(id('d', 'm', 'one'))
    expect(id('c', 'm', 'one')).not.toBe(id('c', 'n', 'one'))
  })
})

describe('the embedded configuration', () => {
  it('fingerprints to the value of the committed cold-prompt runs (tiny, seed 1, blocks of 256, decoder prefill)', () => {
    // results/runs/*.json record configFingerprint 8081639d600a for this sidecar (export-weights of
    // the tiny seed-1 checkpoint under `decoder` with 256-token blocks).
    const config = { preset: 'tiny', seed: 1, blockSize: 256, prefillProfile: 'decoder', sidecarFingerprint: '17100c534c07c99d5066695323ed21add54893078a4fb189a6155425772bee33' }
    expect(embeddedConfigFingerprint(config)).toBe('8081639d600a')
    expect(embeddedConfigFingerprint({ ...config, prefillProfile: 'prefill' })).not.toBe('8081639d600a')
    expect(embeddedModelName('tiny', 1)).toBe('pd-bridge-tiny-seed1')
    expect(embeddedModelLabel(config)).toBe('embedded tiny (seed 1, blocks of 256)')
    const env = embeddedEnvironment(config, 'c0ffee0')
    expect([env.configFingerprint, env.model, env.commit]).toEqual(['8081639d600a', 'embedded tiny (seed 1, blocks of 256)', 'c0ffee0'])
  })

  it('names a decoder other than ours in the label and the fingerprint, and keeps ours as it was', () => {
    const config = { preset: 'tiny', seed: 1, blockSize: 256, prefillProfile: 'f32', sidecarFingerprint: 'e'.repeat(64) }
    const llama = { ...config, decoder: 'llama.cpp (f32 GGUF, F32 cache, 16 threads)', modelName: 'pd-bridge-tiny-seed1-mirrored' }
    expect(embeddedModelLabel(llama)).toBe('embedded tiny (seed 1, blocks of 256, decoder llama.cpp (f32 GGUF, F32 cache, 16 threads))')
    expect(embeddedConfigFingerprint(llama)).not.toBe(embeddedConfigFingerprint(config))
    expect(embeddedConfigFingerprint({ ...llama, decoder: 'llama.cpp (f32 GGUF, F32 cache, 2 threads)' })).not.toBe(embeddedConfigFingerprint(llama))
    expect(embeddedEnvironment(llama, 'c0ffee0').id).not.toBe(embeddedEnvironment(config, 'c0ffee0').id)
  })
})

describe('the commit', () => {
  it('is a short hash inside this repository and `unknown` outside any', () => {
    expect(gitCommit(import.meta.dirname, {})).toMatch(/^[0-9a-f]{7,}$/)
    expect(gitCommit(os.tmpdir(), {})).toBe('unknown')
  })

  it('is PD_RUN_COMMIT where a copy\'s git metadata is not its own (the CUDA rung), when it reads as a commit', () => {
    expect(gitCommit(os.tmpdir(), { PD_RUN_COMMIT: 'b0e68b0' })).toBe('b0e68b0')
    expect(gitCommit(os.tmpdir(), { PD_RUN_COMMIT: 'b0e68b0-dirty' })).toBe('b0e68b0-dirty')
    expect(gitCommit(os.tmpdir(), { PD_RUN_COMMIT: 'not a commit' })).toBe('unknown')
    expect(gitCommit(os.tmpdir(), {})).toBe('unknown')
  })
})

describe('a GPU prefill engine (the CUDA rung)', () => {
  const config = { preset: 'flash-attn', seed: 1, blockSize: 256, prefillProfile: 'transformers bf16 on cuda (NVIDIA H200)', sidecarFingerprint: 'f'.repeat(64) }

  it('is named in the model label and the machine line, and its GPU is part of the id', () => {
    expect(embeddedModelLabel(config)).toBe('embedded flash-attn (seed 1, blocks of 256, prefill engine transformers bf16 on cuda (NVIDIA H200))')
    const withGpu = embeddedEnvironment(config, 'c0ffee0', 'NVIDIA H200')
    const without = embeddedEnvironment(config, 'c0ffee0')
    expect(withGpu.gpu).toBe('NVIDIA H200')
    expect(without.gpu).toBeUndefined()
    expect(withGpu.id).not.toBe(without.id)
    expect(machineLine(withGpu)).toMatch(/cores \(the decoder's\), prefill on NVIDIA H200, model embedded flash-attn/)
    expect(machineLine(without)).not.toMatch(/prefill on/)
    // Our own profiles stay in the fingerprint only: labels of the committed runs do not change.
    expect(embeddedModelLabel({ ...config, prefillProfile: 'prefill' })).toBe('embedded flash-attn (seed 1, blocks of 256)')
  })
})

// loadCheckpoint refuses checkpoints that do not match their config, naming the tensor or field.
import { describe, it, expect, beforeAll, afterAll } from 'vitest'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { CheckpointError, ConfigError, SafetensorsError } from '../../src/errors.ts'
import { tensorFrom, writeShardedCheckpoint, type Tensor } from '../../src/formats/safetensors/index.ts'
import { checkpointConfigJson, loadCheckpoint, makeTensors, presetConfig, presetConfigJson } from '../../src/model/checkpoint/index.ts'
import { removeDir, tempDir } from './helpers.ts'

const cfg = presetConfig('tiny')
const dirs: string[] = []
let base: Map<string, Tensor>

beforeAll(() => {
  base = makeTensors(cfg, 1)
})
afterAll(() => dirs.forEach(removeDir))

/** Write a checkpoint dir from `tensors` and a config.json text; returns the dir. */
async function writeDir (tensors: Map<string, Tensor>, configText = checkpointConfigJson(cfg)): Promise<string> {
  const dir = tempDir('broken')
  dirs.push(dir)
  await writeShardedCheckpoint(dir, tensors, { metadata: { format: 'pt' } })
  writeFileSync(join(dir, 'config.json'), configText)
  return dir
}

async function loadError (dir: string): Promise<Error> {
  const err = await loadCheckpoint(dir).then(() => null, (e: unknown) => e)
  expect(err).toBeInstanceOf(Error)
  return err as Error
}

describe('tensor-level problems are CheckpointErrors naming the tensor', () => {
  it('reports a missing tensor', async () => {
    const tensors = new Map(base)
    tensors.delete('model.layers.2.self_attn.compressor.position_bias')
    const err = await loadError(await writeDir(tensors))
    expect(err).toBeInstanceOf(CheckpointError)
    expect((err as CheckpointError).tensor).toBe('model.layers.2.self_attn.compressor.position_bias')
    expect(err.message).toContain('missing from the checkpoint')
  })

  it('reports a wrong shape with expected and found', async () => {
    const tensors = new Map(base)
    const sinks = base.get('model.layers.1.self_attn.sinks') as Tensor
    tensors.set('model.layers.1.self_attn.sinks', tensorFrom('F32', [2, 2], sinks.data))
    const err = await loadError(await writeDir(tensors))
    expect(err).toBeInstanceOf(CheckpointError)
    expect(err.message).toContain('tensor model.layers.1.self_attn.sinks: wrong shape: expected [4], found [2, 2]')
  })

  it('reports an unexpected tensor', async () => {
    const tensors = new Map(base)
    tensors.set('model.layers.0.self_attn.compressor.position_bias', tensorFrom('F32', [4, 256], new Float32Array(1024)))
    const err = await loadError(await writeDir(tensors))
    expect(err).toBeInstanceOf(CheckpointError)
    expect((err as CheckpointError).tensor).toBe('model.layers.0.self_attn.compressor.position_bias')
    expect(err.message).toContain('unexpected')
  })

  it('ignores mtp.* tensors, as transformers does', async () => {
    const tensors = new Map(base)
    tensors.set('mtp.0.norm.weight', tensorFrom('F32', [256], new Float32Array(256)))
    const loaded = await loadCheckpoint(await writeDir(tensors))
    expect(loaded.weights.has('mtp.0.norm.weight')).toBe(false)
    expect(loaded.weights.size).toBe(base.size)
  })

  it('reports a dtype no float tensor can have (and an integer tensor stored as floats)', async () => {
    const tensors = new Map(base)
    tensors.set('model.norm.weight', tensorFrom('I32', [256], new Int32Array(256)))
    const err = await loadError(await writeDir(tensors))
    expect(err).toBeInstanceOf(CheckpointError)
    expect(err.message).toContain('tensor model.norm.weight: wrong dtype: expected one of F32, BF16, F16, F8_E4M3, found I32')
    const ids = new Map(base)
    ids.set('model.layers.0.mlp.gate.tid2eid', tensorFrom('F32', [512, 2], new Float32Array(1024)))
    const idErr = await loadError(await writeDir(ids))
    expect(idErr.message).toContain('tensor model.layers.0.mlp.gate.tid2eid: wrong dtype: expected one of I64, I32, found F32')
  })

  it.each([[8n, '8'], [-1n, '-1']])('reports a tid2eid id out of range (%s)', async (bad, shown) => {
    const tensors = new Map(base)
    const ids = new BigInt64Array(512 * 2)
    ids[2 * 17 + 1] = bad
    tensors.set('model.layers.0.mlp.gate.tid2eid', tensorFrom('I64', [512, 2], ids))
    const err = await loadError(await writeDir(tensors))
    expect(err).toBeInstanceOf(CheckpointError)
    expect(err.message).toContain(`tensor model.layers.0.mlp.gate.tid2eid: expert id ${shown} at [17, 1] is outside [0, 8)`)
  })
})

describe('config problems are ConfigErrors; a mismatched config is a CheckpointError', () => {
  it('reports a config.json that is not JSON', async () => {
    const dir = await writeDir(base, '{"model_type": "deepseek_v4",')
    const err = await loadError(dir)
    expect(err).toBeInstanceOf(ConfigError)
    expect(err.message).toContain(join(dir, 'config.json'))
  })

  it('reports an invalid field by name', async () => {
    const json = { ...presetConfigJson('tiny'), layer_types: ['sliding_attention', 'bogus_attention', 'sliding_attention', 'sliding_attention'] }
    const err = await loadError(await writeDir(base, JSON.stringify(json)))
    expect(err).toBeInstanceOf(ConfigError)
    expect((err as ConfigError).field).toBe('layer_types[1]')
  })

  it('reports tensors that do not fit a valid but different config', async () => {
    const json = { ...presetConfigJson('tiny'), moe_intermediate_size: 64 }
    const err = await loadError(await writeDir(base, JSON.stringify(json)))
    expect(err).toBeInstanceOf(CheckpointError)
    expect(err.message).toContain('model.layers.0.mlp.experts.gate_up_proj: wrong shape: expected [8, 128, 256], found [8, 256, 256]')
  })

  it('reports a missing config.json clearly', async () => {
    const dir = tempDir('no-config')
    dirs.push(dir)
    await writeShardedCheckpoint(dir, base, {})
    const err = await loadError(dir)
    expect(err).toBeInstanceOf(ConfigError)
    expect(err.message).toContain('config.json: missing')
  })

  it('reports a directory without weights', async () => {
    const dir = tempDir('no-weights')
    dirs.push(dir)
    writeFileSync(join(dir, 'config.json'), checkpointConfigJson(cfg))
    const err = await loadError(dir)
    expect(err).toBeInstanceOf(SafetensorsError)
    expect(err.message).toContain('holds neither model.safetensors nor model.safetensors.index.json')
  })
})

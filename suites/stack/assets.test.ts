// The embedded stack's files: a checkpoint and a sidecar are made once, reused while the bytes on
// disk are what their stamps say, and made again when they are not.
import { readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { loadSidecar } from '../../src/capture/index.ts'
import { checkpointDigest } from '../../src/model/checkpoint/index.ts'
import { ensureCheckpoint, ensureSidecar } from '../../src/stack/assets.ts'
import { tempDir } from './helpers.ts'

const tmp = tempDir('stack-assets')
afterAll(() => tmp.remove())
const model = join(tmp.dir, 'models', 'tiny-seed1')
const sidecar = join(tmp.dir, 'sidecars', 'tiny-seed1-decoder-bs256')

describe('the checkpoint', () => {
  it('is made once, with a stamp beside it, then reused without rewriting', async () => {
    const made = await ensureCheckpoint(model, 'tiny', 1)
    expect(made.made).toBe(true)
    expect(made.digest).toBe(await checkpointDigest(model))
    expect(JSON.parse(readFileSync(`${model}.stamp.json`, 'utf8'))).toEqual({ preset: 'tiny', seed: 1, digest: made.digest })
    const mtime = statSync(join(model, 'model.safetensors')).mtimeMs
    const again = await ensureCheckpoint(model, 'tiny', 1)
    expect(again).toEqual({ dir: model, digest: made.digest, made: false })
    expect(statSync(join(model, 'model.safetensors')).mtimeMs).toBe(mtime)
  })

  it('is made again when a weight byte changed, and comes back identical (the maker is deterministic)', async () => {
    const file = join(model, 'model.safetensors')
    const bytes = readFileSync(file)
    const good = (await ensureCheckpoint(model, 'tiny', 1)).digest
    bytes[bytes.length - 1] ^= 1
    writeFileSync(file, bytes)
    const remade = await ensureCheckpoint(model, 'tiny', 1)
    expect(remade.made).toBe(true)
    expect(remade.digest).toBe(good)
  })

  it('is made again for another seed', async () => {
    const other = await ensureCheckpoint(model, 'tiny', 2)
    expect(other.made).toBe(true)
    expect(JSON.parse(readFileSync(`${model}.stamp.json`, 'utf8')).seed).toBe(2)
    await ensureCheckpoint(model, 'tiny', 1)
  })
})

describe('the sidecar', () => {
  it('is exported once for the checkpoint, profile and block size, then reused', async () => {
    const ck = await ensureCheckpoint(model, 'tiny', 1)
    const made = await ensureSidecar(sidecar, ck, 'decoder', 256)
    expect(made.made).toBe(true)
    expect(made.fingerprint).toBe((await loadSidecar(sidecar)).fingerprint)
    const again = await ensureSidecar(sidecar, ck, 'decoder', 256)
    expect(again).toEqual({ dir: sidecar, fingerprint: made.fingerprint, made: false })
  })

  it('is exported again when its weights were edited or the checkpoint changed', async () => {
    const ck = await ensureCheckpoint(model, 'tiny', 1)
    const file = join(sidecar, 'weights.safetensors')
    const bytes = readFileSync(file)
    bytes[bytes.length - 1] ^= 1
    writeFileSync(file, bytes)
    const remade = await ensureSidecar(sidecar, ck, 'decoder', 256)
    expect(remade.made).toBe(true)
    const otherCheckpoint = { ...ck, digest: '0'.repeat(64) }
    expect((await ensureSidecar(sidecar, otherCheckpoint, 'decoder', 256)).made).toBe(true)
    expect((await ensureSidecar(sidecar, ck, 'decoder', 512)).made).toBe(true)
    expect((await loadSidecar(sidecar)).json.blockSize).toBe(512)
  })

  it('under a cache math it is exported with that record, stamped with it, and never taken for the profile-only one (nor back)', async () => {
    const ck = await ensureCheckpoint(model, 'tiny', 1)
    const plain = await ensureSidecar(sidecar, ck, 'decoder', 256)
    expect((await loadSidecar(sidecar)).cacheMath).toBe('decoder')
    const mlx = await ensureSidecar(sidecar, ck, 'decoder', 256, 'mlx-cpu')
    expect(mlx.made).toBe(true)
    expect(mlx.fingerprint).not.toBe(plain.fingerprint)
    expect((await loadSidecar(sidecar)).cacheMath).toBe('mlx-cpu')
    expect(JSON.parse(readFileSync(`${sidecar}.stamp.json`, 'utf8')).cacheMath).toBe('mlx-cpu')
    expect((await ensureSidecar(sidecar, ck, 'decoder', 256, 'mlx-cpu')).made).toBe(false)
    const back = await ensureSidecar(sidecar, ck, 'decoder', 256)
    expect(back.made).toBe(true)
    expect((await loadSidecar(sidecar)).cacheMath).toBe('decoder')
    // A profile-only stamp has no cacheMath key: the stamps ours and llama.cpp write are as before.
    expect(Object.keys(JSON.parse(readFileSync(`${sidecar}.stamp.json`, 'utf8'))).sort()).toEqual(['blockSize', 'checkpointDigest', 'fingerprint', 'profile'])
  })
})

// The engine refuses a sidecar that describes another geometry than its model: the effective rope
// tables (fingerprints) and max_position_embeddings are compared, not raw keys, so a sidecar left
// at an old YaRN factor is caught before any capture is computed with it.
import { mkdir, readFile, symlink, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { exportWeights, loadSidecar } from '../../src/capture/index.ts'
import { ConfigError } from '../../src/errors.ts'
import { openCaptureBackend } from '../../src/engines/prefill/capture-backend.ts'
import { checkSidecarAgreesWithModel } from '../../src/engines/prefill/sidecar-agreement.ts'
import { loadDeepseekV4Config, type DeepseekV4Config } from '../../src/model/config.ts'
import { tempDir, tinyCheckpoint, tinySidecar } from './helpers.ts'

const tmp = tempDir('prefill-agreement')
afterAll(tmp.remove)
let model: string
let config: DeepseekV4Config

/** A copy of the tiny checkpoint whose config.json is edited by `edit` (weights linked, not copied). */
async function variant (name: string, edit: (json: Record<string, any>) => void): Promise<string> {
  const dir = join(tmp.dir, name)
  await mkdir(dir)
  for (const f of ['model.safetensors', 'tokenizer.json', 'tokenizer_config.json', 'special_tokens_map.json', 'generation_config.json']) {
    await symlink(join(model, f), join(dir, f))
  }
  const json = JSON.parse(await readFile(join(model, 'config.json'), 'utf8')) as Record<string, any>
  edit(json)
  await writeFile(join(dir, 'config.json'), JSON.stringify(json))
  return dir
}

async function refusal (sidecarDir: string): Promise<string> {
  const e = await openCaptureBackend({ sidecarDir, captureRoot: tmp.dir, config, modelDir: model, profile: 'prefill' }).then(() => undefined, (err: unknown) => err)
  expect(e).toBeInstanceOf(ConfigError)
  return (e as Error).message
}

beforeAll(async () => {
  model = await tinyCheckpoint()
  config = await loadDeepseekV4Config(model)
})

describe('the sidecar must describe the model the engine runs', () => {
  it('accepts the sidecar exported from the same checkpoint and reports its fingerprint', async () => {
    const s = await tinySidecar()
    const backend = await openCaptureBackend({ sidecarDir: s.dir, captureRoot: tmp.dir, config, modelDir: model, profile: 'prefill' })
    expect(backend.fingerprint).toBe(s.fingerprint)
  })

  it('refuses a sidecar whose compress YaRN factor is another (16 vs 32), naming the table and both factors', async () => {
    const other = await variant('factor16', (c) => { c.rope_parameters.compress.factor = 16 })
    await exportWeights({ model: other, profile: 'decoder', out: join(tmp.dir, 'sidecar-factor16') })
    const message = await refusal(join(tmp.dir, 'sidecar-factor16'))
    expect(message).toContain('ropeFingerprints.compressed_sparse_attention: is ')
    expect(message).toContain('(factor 16) in the sidecar but ')
    expect(message).toContain('(factor 32) in the model')
    expect(message).toContain('the effective rope tables differ')
  })

  it('refuses a sidecar sized for another window (max_position_embeddings)', async () => {
    const other = await variant('window64k', (c) => { c.max_position_embeddings = 65536 })
    await exportWeights({ model: other, profile: 'decoder', out: join(tmp.dir, 'sidecar-64k') })
    const message = await refusal(join(tmp.dir, 'sidecar-64k'))
    expect(message).toContain('maxPositionEmbeddings: is 65536 in the sidecar but 32768 in the model')
    expect(message).toContain('the window lives in four places')
  })

  it('names layer count, hidden size, layer types and the window for other geometries', async () => {
    const { json } = await loadSidecar((await tinySidecar()).dir)
    const cases: Array<[Partial<DeepseekV4Config>, string]> = [
      [{ numHiddenLayers: 5 }, 'layers: is 4 layers in the sidecar but 5'],
      [{ hiddenSize: 512 }, 'hiddenSize: is 256 in the sidecar but 512'],
      [{ layerTypes: [...config.layerTypes].reverse() }, 'layers.0.layerType: is '],
      [{ slidingWindow: 256 }, 'slidingWindow: is 128 in the sidecar but 256'],
    ]
    for (const [change, fragment] of cases) {
      expect(() => checkSidecarAgreesWithModel(json, { ...config, ...change }, 'sidecar.json', model)).toThrow(fragment)
    }
    expect(() => checkSidecarAgreesWithModel(json, config, 'sidecar.json', model)).not.toThrow()
  })
})

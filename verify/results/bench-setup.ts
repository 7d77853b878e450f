// What a micro benchmark needs to stand in the same environment as the cold-prompt runs: the
// embedded stack's checkpoint and sidecar, made the way the stack makes them (deterministic, so the
// sidecar fingerprint and hence the environment id are the ones cold-bench records).
import { join } from 'node:path'
import { exportWeights, type Sidecar } from '../../src/capture/index.ts'
import { makeCheckpoint, type PresetName } from '../../src/model/checkpoint/index.ts'
import { EMBEDDED_DECODER_PROFILE } from '../../src/stack/embedded.ts'
import { embeddedEnvironment, type EmbeddedConfig } from './environment.ts'
import type { RunEnvironment } from './record.ts'

/** Which embedded configuration a micro benchmark files its record under. */
export interface BenchConfig {
  preset: PresetName
  seed: number
  blockSize: number
  prefillProfile: string
}

/** The checkpoint, the decoder's sidecar and the environment of one embedded configuration. */
export interface BenchSetup {
  checkpointDir: string
  sidecar: Sidecar
  config: EmbeddedConfig
  environment: RunEnvironment
}

/**
 * Make the `config` checkpoint and its decoder sidecar (profile `decoder`, the configured block
 * size, as the stack exports it) under `dir`, and describe the environment.
 */
export async function prepareBench (config: BenchConfig, dir: string): Promise<BenchSetup> {
  const checkpointDir = join(dir, `${config.preset}-seed${config.seed}`)
  await makeCheckpoint({ preset: config.preset, seed: config.seed, out: checkpointDir })
  const sidecar = await exportWeights({ model: checkpointDir, profile: EMBEDDED_DECODER_PROFILE, out: `${checkpointDir}-sidecar`, blockSize: config.blockSize })
  const embedded: EmbeddedConfig = { preset: config.preset, seed: config.seed, blockSize: config.blockSize, prefillProfile: config.prefillProfile, sidecarFingerprint: sidecar.fingerprint }
  return { checkpointDir, sidecar, config: embedded, environment: embeddedEnvironment(embedded) }
}

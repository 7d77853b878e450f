// The `environment` block every record carries (cold-prompt runs and micro benchmarks alike). One
// builder for both, so a run and a micro benchmark on the same machine and config get the same id,
// and the report can put them in one section without ever comparing across machines.
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import os from 'node:os'
import type { RunEnvironment } from './record.ts'

/** The first 12 hex digits of SHA-256 of `text`: the fingerprints in the environment block. */
export function shortSha (text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 12)
}

/** What describes an environment besides the machine: the config and the model it served. */
export interface EnvironmentConfig {
  configFingerprint: string
  model: string
  /** The source commit; left out of the id (a new commit on the same machine and config is the same environment). */
  commit: string
  /** The prefill engine's GPU, if any: part of the id (absent, ids stay what they were). */
  gpu?: string
}

/**
 * This machine plus `config`. The id hashes every field but the commit, in this order (the order
 * is part of the id: records written before this module existed keep theirs).
 */
export function describeEnvironment (config: EnvironmentConfig): RunEnvironment {
  const base = {
    cpu: os.cpus()[0]?.model ?? 'unknown',
    cores: os.cpus().length,
    memoryBytes: os.totalmem(),
    node: process.version,
    os: `${os.platform()} ${os.release()} ${os.arch()}`,
    configFingerprint: config.configFingerprint,
    model: config.model,
    ...(config.gpu !== undefined ? { gpu: config.gpu } : {}),
  }
  return { id: `env-${shortSha(JSON.stringify(base))}`, ...base, commit: config.commit }
}

/** `PD_RUN_COMMIT` when it reads as a commit, else `git rev-parse --short HEAD` in `cwd` (a read-only query), or `unknown` outside a repository. */
export function gitCommit (cwd: string = process.cwd(), env: NodeJS.ProcessEnv = process.env): string {
  // A copy whose git metadata is not its own (the CUDA rung's, protocols/cuda-rung/pack.sh) says which it is.
  const given = env.PD_RUN_COMMIT
  if (given !== undefined && /^[0-9a-f]{7,40}(-dirty)?$/.test(given)) return given
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim() || 'unknown'
  }
  catch {
    return 'unknown'
  }
}

/** The parts of the embedded stack's configuration that its fingerprint covers. */
export interface EmbeddedConfig {
  preset: string
  /** The checkpoint's seed. */
  seed: number
  blockSize: number
  /** The prefill engine's numerics profile. */
  prefillProfile: string
  /** The decoder's sidecar fingerprint (geometry and weights). */
  sidecarFingerprint: string
  /**
   * The decoder when it is not our own, e.g. `llama.cpp (f32 GGUF, F32 cache, 16 threads)`: named in
   * the label and the fingerprint. Absent for ours, so the environments of earlier records keep their ids.
   */
  decoder?: string
  /** The decoder's model name when it is not embeddedModelName's (llama.cpp's checkpoint is the mirrored one). */
  modelName?: string
}

/** The model id the embedded decoder serves (src/stack/embedded.ts names it the same way; cold-bench checks). */
export function embeddedModelName (preset: string, seed: number): string {
  return `pd-bridge-${preset}-seed${seed}`
}

/** The environment's `model` text for the embedded stack. */
export function embeddedModelLabel (config: Pick<EmbeddedConfig, 'preset' | 'seed' | 'blockSize' | 'decoder'> & { prefillProfile?: string }): string {
  // A third-party prefill engine (the CUDA rung's transformers) is named; our own profiles are in the fingerprint.
  const engine = config.prefillProfile?.startsWith('transformers') === true ? `, prefill engine ${config.prefillProfile}` : ''
  const decoder = config.decoder !== undefined ? `, decoder ${config.decoder}` : ''
  return `embedded ${config.preset} (seed ${config.seed}, blocks of ${config.blockSize}${engine}${decoder})`
}

/** The machine line of a report section: `CPU, N cores[, prefill on GPU], model M.` */
export function machineLine (e: RunEnvironment): string {
  return `${e.cpu}, ${e.cores} cores${e.gpu !== undefined ? ` (the decoder's), prefill on ${e.gpu}` : ''}, model ${e.model}.`
}

/** The embedded stack's config fingerprint: preset, seed, block size, prefill profile, sidecar and model name. */
export function embeddedConfigFingerprint (config: EmbeddedConfig): string {
  return shortSha(JSON.stringify({
    preset: config.preset,
    seed: config.seed,
    blockSize: config.blockSize,
    prefillProfile: config.prefillProfile,
    sidecar: config.sidecarFingerprint,
    model: config.modelName ?? embeddedModelName(config.preset, config.seed),
    ...(config.decoder !== undefined ? { decoder: config.decoder } : {}),
  }))
}

/** The environment of the embedded stack under `config` on this machine. */
export function embeddedEnvironment (config: EmbeddedConfig, commit: string = gitCommit(), gpu?: string): RunEnvironment {
  return describeEnvironment({ configFingerprint: embeddedConfigFingerprint(config), model: embeddedModelLabel(config), commit, gpu })
}

/** The environment of a deployment reached over HTTP: nothing is known of its config. */
export function remoteEnvironment (url: string, commit: string = gitCommit()): RunEnvironment {
  return describeEnvironment({ configFingerprint: 'remote', model: `remote ${url}`, commit })
}

/** What an environment is, in words: the prefill engine (and GPU), the decoder and its cores, the model. */
export interface Route {
  prefill: string
  decoder: string
  model: string
  /** Whether the prefill ran on a GPU. */
  gpu: boolean
}

/**
 * Read embeddedModelLabel's text back into a route (the two live here together, so they agree).
 * `prefill engine transformers bf16 on cuda (NVIDIA H200)` reads as `transformers bf16 on NVIDIA H200`;
 * a label without one is our prefill engine on the machine's cores; likewise the decoder.
 */
export function describeRoute (e: RunEnvironment): Route {
  const label = e.model
  if (!label.startsWith('embedded ')) return { prefill: 'a deployment reached over HTTP', decoder: 'its decoder', model: label, gpu: e.gpu !== undefined }
  const model = /^embedded (\S+)/.exec(label)?.[1] ?? label
  const engine = /prefill engine (.+?)(?:, decoder |\)$)/.exec(label)?.[1]
  const prefill = engine === undefined ? `our prefill engine on ${e.cores} cores` : engine.replace(/ on cuda(?::\d+)? \((.+)\)$/, ' on $1')
  const other = /, decoder (.+)\)$/.exec(label)?.[1]
  const decoder = other === undefined ? `our decoder on ${e.cores} cores` : `${other.replace(/ \(([^)]*?), (\d+) threads\)$/, ' ($1)')} on ${e.cores} cores`
  return { prefill, decoder, model, gpu: e.gpu !== undefined }
}

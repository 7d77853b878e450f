// A real deployment of the tiny model in a temporary directory: the decoder's checkpoint, a prefill
// node's config.json, a sidecar exported from the decoder under the decoder profile, a launch env
// file, and a block store. Mutations edit exactly one place, as an operator would.
//
// The gate fails without needle evidence (the needle law). Tests about other checks get a needle
// record that passes under the deployment's geometry as it is when options() is called, so each
// keeps failing on exactly its own file and field; the law itself is tested in needle-*.test.ts.
import { mkdirSync, writeFileSync } from 'node:fs'
import { mkdtemp, mkdir, readFile, readdir, rm, symlink, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { exportWeights, geometryJson, sidecarWeightSpecs } from '../../src/capture/index.ts'
import { parseDeepseekV4Config } from '../../src/model/config.ts'
import { getProfile } from '../../src/model/profiles/index.ts'
import { makeCheckpoint, type PresetName } from '../../src/model/checkpoint/index.ts'
import type { GateOptions } from '../../verify/gate/index.ts'
import { sidecarFingerprint, SIDECAR_WEIGHTS, type SidecarJson } from '../../src/wire/sidecar-format.ts'
import { deploymentNeedleGeometry, needleRecord } from './needle-records.ts'

/** The tiny model's launch parameters, consistent with its config (window 32768 = 32 x 1024). */
export const TINY_LAUNCH: Record<string, string> = {
  PD_MAX_MODEL_LEN: '32768',
  PD_ROPE_FACTOR: '32',
  PD_ORIGINAL_MAX_POS: '1024',
  PD_DECODER_PROFILE: 'decoder',
  PD_MAX_BRIDGE_TOKENS: '32000',
  PD_PREFILL_MAX_MODEL_LEN: '32768',
  PD_PREFILL_MAX_BATCHED_TOKENS: '512',
  PD_PREFILL_CHUNKED: '1',
  PD_DECODER_MAX_CONTEXT: '32768',
  PD_DEFAULT_MAX_TOKENS: '1024',
  PD_CAPTURE_BUDGET_BYTES: '268435456',
  PD_STORE_MAX_BYTES: '67108864',
  PD_BLOCK_SIZE: '256',
  PD_PREFILL_TOKENS_PER_S: '2000',
  PD_DEADLINE_PREFILL_MS: '60000',
  PD_DEADLINE_CAPTURE_MS: '60000',
}

/** The env-file text of launch parameters, with a comment line as operators write them. */
export function envText (values: Record<string, string>): string {
  return ['# launch parameters (pd-bridge window gate test deployment)', ...Object.entries(values).map(([k, v]) => `${k}=${v}`), ''].join('\n')
}

/** A deployment on disk. */
export interface Deployment {
  root: string
  /** The decoder's checkpoint (config.json + weights). */
  modelDir: string
  prefillConfig: string
  decoderConfig: string
  sidecarDir: string
  launchFile: string
  storeDir: string
  /**
   * Gate options for this deployment (no report files, native check off unless asked, needle
   * evidence from needleEvidence() unless `extra` sets needleRecords).
   */
  options: (extra?: Partial<GateOptions>) => GateOptions
  /** Write a needle record that passes under the deployment's current geometry; [] when it cannot be computed. */
  needleEvidence: () => string[]
  /** A config.json object of the decoder (fresh copy). */
  configJson: () => Promise<Record<string, any>>
  /** Write launch parameters (the base ones with `changes` applied; undefined deletes a key). */
  writeLaunch: (changes?: Record<string, string | undefined>) => Promise<void>
  /**
   * Re-export the sidecar from a copy of the checkpoint whose config.json is edited by `edit` (the
   * other files linked); returns that copy (a prefill node launched with the edited config).
   */
  exportSidecarFrom: (edit: (json: Record<string, any>) => void) => Promise<string>
  cleanup: () => Promise<void>
}

async function writeJson (file: string, json: unknown): Promise<void> {
  await writeFile(file, JSON.stringify(json, null, 2) + '\n')
}

/** Make the seed-1 deployment of `preset` (tiny, or needle: the same geometry): every place consistent. */
export async function makeDeployment (label: string, preset: PresetName = 'tiny'): Promise<Deployment> {
  const root = await mkdtemp(join(tmpdir(), `pd-bridge-gate-${label}-`))
  const modelDir = join(root, 'decoder')
  await makeCheckpoint({ preset, seed: 1, out: modelDir, force: true })
  const prefillDir = join(root, 'prefill')
  await mkdir(prefillDir)
  const prefillConfig = join(prefillDir, 'config.json')
  await writeFile(prefillConfig, await readFile(join(modelDir, 'config.json')))
  const sidecarDir = join(root, 'sidecar')
  await exportWeights({ model: modelDir, profile: 'decoder', out: sidecarDir, blockSize: 256 })
  const launchFile = join(root, 'launch.env')
  const storeDir = join(root, 'store')
  await mkdir(storeDir)
  let variants = 0
  const d: Deployment = {
    root,
    modelDir,
    prefillConfig,
    decoderConfig: join(modelDir, 'config.json'),
    sidecarDir,
    launchFile,
    storeDir,
    options: (extra = {}) => ({
      launch: launchFile, prefillConfig, sidecar: sidecarDir, decoderConfig: join(modelDir, 'config.json'), native: false,
      ...('needleRecords' in extra ? {} : { needleRecords: d.needleEvidence() }),
      ...extra,
    }),
    needleEvidence: () => {
      const geometry = deploymentNeedleGeometry(join(modelDir, 'config.json'), sidecarDir)
      if (geometry === undefined) return []
      const dir = join(root, 'needle-evidence')
      mkdirSync(dir, { recursive: true })
      const file = join(dir, `pass-${geometry.key.slice(0, 16)}.json`)
      writeFileSync(file, JSON.stringify(needleRecord(geometry), null, 2) + '\n')
      return [file]
    },
    configJson: async () => JSON.parse(await readFile(join(modelDir, 'config.json'), 'utf8')) as Record<string, any>,
    writeLaunch: async (changes = {}) => {
      const values: Record<string, string> = { ...TINY_LAUNCH }
      for (const [k, v] of Object.entries(changes)) {
        if (v === undefined) delete values[k]
        else values[k] = v
      }
      await writeFile(launchFile, envText(values))
    },
    exportSidecarFrom: async (edit) => {
      const dir = join(root, `variant-${variants++}`)
      await mkdir(dir)
      for (const name of await readdir(modelDir)) {
        if (name !== 'config.json') await symlink(join(modelDir, name), join(dir, name))
      }
      const json = await d.configJson()
      edit(json)
      await writeJson(join(dir, 'config.json'), json)
      await rm(sidecarDir, { recursive: true, force: true })
      await exportWeights({ model: dir, profile: 'decoder', out: sidecarDir, blockSize: 256 })
      return dir
    },
    cleanup: async () => await rm(root, { recursive: true, force: true }),
  }
  await d.writeLaunch()
  return d
}

/**
 * sidecar.json for a config without weights on disk (V4-Flash): every field as export-weights
 * writes it, self-consistent fingerprints, and a stated (never read) weights digest. For the rope
 * and limit checks only; the bridge-vs-native check needs a real sidecar.
 */
export function sidecarJsonFor (configJson: Record<string, unknown>, profileName: string, blockSize: number): SidecarJson {
  const cfg = parseDeepseekV4Config(configJson)
  const profile = getProfile(profileName)
  const base = geometryJson(cfg, profile, blockSize)
  const sha256 = '0'.repeat(64)
  return {
    ...base,
    weights: { file: SIDECAR_WEIGHTS, bytes: 1, sha256, tensors: sidecarWeightSpecs(base).map((s) => s.name) },
    fingerprint: sidecarFingerprint(base, sha256),
  }
}

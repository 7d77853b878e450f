// The front door's deployment config (src/config, `--config FILE`) as a source of launch values and
// paths. The front door runs with what it holds, defaults included, so those are the values the gate
// checks: its bridge cap, block size, decoder profile, capture budget and stage deadlines. Where the
// launch file sets the same key to another value, the two files disagree about one deployment; that
// is a failure naming both. The config's paths (sidecar, decoder model, block store, model name)
// fill gate options that were not given.
import { loadFrontConfig, type FrontConfig } from '../../src/config/index.ts'
import type { Finding } from './finding.ts'
import { LAUNCH_FIELD, type LaunchParams } from './launch.ts'

/** Launch key <- front config field (dotted path) and how to read it. */
const MAPPING: ReadonlyArray<{ key: string, field: string, get: (c: FrontConfig) => number | string | undefined }> = [
  { key: 'PD_MAX_BRIDGE_TOKENS', field: 'routing.maxBridgeTokens', get: (c) => c.routing.maxBridgeTokens },
  { key: 'PD_BLOCK_SIZE', field: 'decoder.blockSize', get: (c) => c.decoder.blockSize },
  { key: 'PD_DECODER_PROFILE', field: 'decoder.profile', get: (c) => c.decoder.profile },
  { key: 'PD_CAPTURE_BUDGET_BYTES', field: 'prefill.memoryBudgetBytes', get: (c) => c.prefill.memoryBudgetBytes },
  { key: 'PD_DEADLINE_QUEUE_MS', field: 'deadlines.queueMs', get: (c) => c.deadlines.queueMs },
  { key: 'PD_DEADLINE_SUBMIT_MS', field: 'deadlines.submitMs', get: (c) => c.deadlines.submitMs },
  { key: 'PD_DEADLINE_CAPTURE_MS', field: 'deadlines.captureMs', get: (c) => c.deadlines.captureMs },
  { key: 'PD_DEADLINE_WRITE_MS', field: 'deadlines.writeMs', get: (c) => c.deadlines.writeMs },
  { key: 'PD_DEADLINE_RESCAN_MS', field: 'deadlines.rescanMs', get: (c) => c.deadlines.rescanMs },
  { key: 'PD_DEADLINE_BRIDGE_MS', field: 'deadlines.bridgeMs', get: (c) => c.deadlines.bridgeMs },
  { key: 'PD_DEADLINE_DECODER_MS', field: 'deadlines.decoderHeadersMs', get: (c) => c.deadlines.decoderHeadersMs },
  { key: 'PD_DEADLINE_DECODER_IDLE_MS', field: 'deadlines.decoderIdleMs', get: (c) => c.deadlines.decoderIdleMs },
]

/** Paths the front config names, for gate options not given on the command line. */
export interface FrontConfigPaths {
  sidecar?: string
  /** The decoder's checkpoint directory (its config.json is the decoder's place). */
  decoderModel?: string
  store?: string
  modelName?: string
}

/** The front config read for the gate: its file, paths, and the launch values it implies. */
export interface FrontConfigForGate {
  file: string
  paths: FrontConfigPaths
  config: FrontConfig
}

/** Read and validate the front door's config file (no PD_* environment overrides: the file is what is checked). */
export async function readFrontConfigForGate (file: string): Promise<FrontConfigForGate> {
  const loaded = await loadFrontConfig({ file, env: {} })
  const c = loaded.config
  return {
    file: loaded.file ?? file,
    config: c,
    paths: { sidecar: c.sidecar, decoderModel: c.decoder.model, store: c.decoder.cacheDir, modelName: c.decoder.modelName },
  }
}

/**
 * Merge the front config's values into the launch parameters: a key the launch file leaves unset
 * takes the config's value (and its origin, for messages); a key both set to different values is a
 * failure naming both files.
 */
export function mergeFrontConfig (launch: LaunchParams, front: FrontConfigForGate): { launch: LaunchParams, findings: Finding[] } {
  const merged: LaunchParams = { ...launch, deadlinesMs: { ...launch.deadlinesMs }, setKeys: new Set(launch.setKeys), origins: { ...launch.origins } }
  const findings: Finding[] = []
  for (const m of MAPPING) {
    const value = m.get(front.config)
    if (value === undefined) continue
    const isDeadline = m.key.startsWith('PD_DEADLINE_')
    const current = isDeadline ? launch.deadlinesMs[m.key] : launch.setKeys.has(m.key) ? (launch as unknown as Record<string, unknown>)[LAUNCH_FIELD[m.key]] : undefined
    if (current !== undefined && current !== value) {
      findings.push({ check: 'config', rule: 'agreement', status: 'fail', file: front.file, field: m.field, message: `is ${String(value)}, but ${m.key} is ${String(current)} in ${launch.file}: the deployment config and the launch parameters disagree` })
      continue
    }
    if (current !== undefined) continue
    if (isDeadline) merged.deadlinesMs[m.key] = value as number
    else (merged as unknown as Record<string, unknown>)[LAUNCH_FIELD[m.key]] = value
    merged.setKeys.add(m.key)
    merged.origins[m.key] = { file: front.file, field: m.field }
  }
  if (findings.length === 0) findings.push({ check: 'config', rule: 'agreement', status: 'pass', file: front.file, message: `agrees with ${launch.file} on every key both set` })
  return { launch: merged, findings }
}

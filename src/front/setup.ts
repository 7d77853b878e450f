// What bridging needs besides the running links, built once per decoder model name: the decoder's
// tokenizer and config (from its checkpoint directory), the sidecar's geometry, and the decoder's
// store opened by its kind's record with the decoder's own layout (model name, block size, geometry). The store
// answers "how much of this prompt is cached" and is where the writer puts blocks. The capture's
// sidecar must describe exactly this decoder (checkCaptureTarget); a mismatch is reported, never
// bridged around.
import type { KeyObject } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { parseSidecarJson, SIDECAR_JSON, type SidecarJson } from '../wire/sidecar-format.ts'
import type { FrontConfig } from '../config/index.ts'
import type { PrefixCacheEvent } from '../decode/prefix-cache/index.ts'
import type { DecoderKind } from '../decoders/kind.ts'
import type { DecoderTarget } from '../decoders/target.ts'
import { ConfigError, PdBridgeError } from '../errors.ts'
import { loadDeepseekV4Config, type DeepseekV4Config } from '../model/config.ts'
import { loadTokenizer, type Tokenizer } from '../model/tokenizer/index.ts'

/** Everything a bridge computes with. */
export interface BridgeSetup {
  tokenizer: Tokenizer
  cfg: DeepseekV4Config
  /** The model name hashed into block keys. */
  modelName: string
  sidecar: { dir: string, json: SidecarJson, fingerprint: string }
  /** The decoder's store (its kind's: blocks, state files), as the writer's target. */
  target: DecoderTarget
  blockSize: number
  /** Why a capture under this sidecar cannot go into this store (geometry mismatch), if it cannot. */
  problem?: string
}

/** A part of the config bridging needs that is not set: the reason requests are declined. */
export function missingForBridge (config: FrontConfig): string | undefined {
  const missing: string[] = []
  if (config.prefill.url === undefined) missing.push('prefill.url (PD_PREFILL_URL)')
  if (config.share.url === undefined && config.capture.dir === undefined) missing.push('share.url (PD_SHARE_URL) or capture.dir (PD_CAPTURE_DIR)')
  if (config.sidecar === undefined) missing.push('sidecar (PD_SIDECAR)')
  if (config.decoder.model === undefined) missing.push('decoder.model (PD_MODEL)')
  if (config.decoder.cacheDir === undefined) missing.push('decoder.cacheDir (PD_CACHE_DIR)')
  return missing.length > 0 ? `bridging is off: the config has no ${missing.join(', ')}` : undefined
}

async function readSidecar (dir: string): Promise<{ dir: string, json: SidecarJson, fingerprint: string }> {
  const file = join(dir, SIDECAR_JSON)
  let text: string
  try {
    text = await readFile(file, 'utf8')
  } catch (e) {
    throw new ConfigError('sidecar', `cannot read ${SIDECAR_JSON}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`, file)
  }
  const json = parseSidecarJson(text, file)
  return { dir, json, fingerprint: json.fingerprint }
}

/**
 * Build the setup for the decoder model `modelName`; throws a PdBridgeError saying what is wrong.
 * With `blockKey` (the deployment's block key) every block or state file written carries its keyed digest.
 */
export async function buildSetup (config: FrontConfig, kind: DecoderKind, modelName: string, log: (event: PrefixCacheEvent) => void, blockKey?: KeyObject): Promise<BridgeSetup> {
  const why = missingForBridge(config)
  if (why !== undefined) throw new PdBridgeError(why)
  const modelDir = config.decoder.model as string
  const [tokenizer, cfg, sidecar] = await Promise.all([
    loadTokenizer(modelDir),
    loadDeepseekV4Config(modelDir),
    readSidecar(config.sidecar as string),
  ])
  const target = await kind.store.openTarget({
    decoder: config.decoder,
    cacheDir: config.decoder.cacheDir as string,
    modelName,
    cfg,
    blockSize: config.decoder.blockSize,
    ...(sidecar.json.cacheMath !== undefined ? { cacheMath: sidecar.json.cacheMath } : {}),
    authKey: blockKey,
    builders: config.limits.writerBuilders,
    log,
  })
  let problem: string | undefined
  try {
    target.checkSidecar(sidecar.json)
  } catch (e) {
    // Kept, not thrown: prompts are still tokenized and routed; only bridging is refused.
    problem = `geometry mismatch: ${(e as Error).message}`
  }
  return { tokenizer, cfg, modelName, sidecar, target, blockSize: config.decoder.blockSize, ...(problem !== undefined ? { problem } : {}) }
}

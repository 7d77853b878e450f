// Your settings for the embedded stack's front door, `<state>/front.json`: read at every start and
// never written, so an edit survives restarts. The stack owns the links (it starts the decoder,
// prefill engine and share itself and learns their ports at start), so those keys are refused
// there; what is yours is how the front door listens, routes, queues, times out, limits and logs,
// and how serve restarts the stack's children (`restarts`).
import { readFile } from 'node:fs/promises'
import { ENV_OVERRIDES, parseFrontConfig, type FrontConfig } from '../config/index.ts'
import { ConfigError } from '../errors.ts'
import type { DeepseekV4Config } from '../model/config.ts'

/** The keys of front.json that are yours under the embedded stack. */
const YOURS = ['listen', 'routing', 'queue', 'deadlines', 'limits', 'log', 'prefill', 'restarts'] as const
/** The one prefill key that is yours (the URL is the stack's). */
const YOUR_PREFILL_KEYS = ['memoryBudgetBytes']

/** What front.json sets, split by where it goes. */
export interface UserFrontSettings {
  listen?: { host?: string, port?: number }
  routing?: { minTokens?: number, minTail?: number, maxBridgeTokens?: number }
  prefill?: { memoryBudgetBytes?: number }
  /** serve's restart policy: the file's `restarts` with the PD_RESTART_* variables applied, validated, defaults filled in. */
  restarts: FrontConfig['restarts']
  /** queue, deadlines, limits, log: passed through as written. */
  rest: Record<string, unknown>
}

/** The PD_* variables of `restarts`: serve applies these itself (the front door's own variables reach it in its environment). */
const RESTART_VARIABLES = ENV_OVERRIDES.filter((o) => o.key.startsWith('restarts.')).map((o) => o.name)

/**
 * Read `<state>/front.json` if it exists; a key the stack owns, or an invalid value (in the file, or
 * in a PD_RESTART_* variable of `env`), is a ConfigError naming it.
 */
export async function readUserFrontSettings (file: string, env: Record<string, string | undefined> = process.env): Promise<UserFrontSettings> {
  const restartEnv = Object.fromEntries(RESTART_VARIABLES.map((name) => [name, env[name]]))
  // No file: no settings of yours, validated like an empty one (the restart variables still apply).
  const text = await readFile(file, 'utf8').catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return '{}'
    throw err
  })
  let raw: unknown
  try {
    raw = JSON.parse(text)
  } catch (e) {
    throw new ConfigError('(json)', `not valid JSON: ${(e as Error).message}`, file)
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw new ConfigError('(root)', 'must be a JSON object', file)
  const obj = raw as Record<string, unknown>
  for (const key of Object.keys(obj)) {
    if (!(YOURS as readonly string[]).includes(key)) {
      throw new ConfigError(key, `is set by the embedded stack (it starts every part and wires them at start); here you may set ${YOURS.join(', ')} (prefill: memoryBudgetBytes only). To run your own deployment, use serve --config FILE`, file)
    }
  }
  const prefill = obj.prefill as Record<string, unknown> | undefined
  for (const key of Object.keys(prefill ?? {})) {
    if (!YOUR_PREFILL_KEYS.includes(key)) throw new ConfigError(`prefill.${key}`, 'is set by the embedded stack; here only prefill.memoryBudgetBytes is yours', file)
  }
  // Validate now, with a stand-in for the links the stack fills in, so a typo fails before anything starts.
  const { config } = parseFrontConfig({ ...obj, decoder: { url: 'http://127.0.0.1:1' } }, restartEnv, file)
  const { listen, routing, prefill: _prefill, restarts: _restarts, ...rest } = obj
  return { listen: listen as UserFrontSettings['listen'], routing: routing as UserFrontSettings['routing'], prefill: prefill as UserFrontSettings['prefill'], restarts: config.restarts, rest }
}

/**
 * The launch parameters the embedded stack started with, as the gate reads them (an env file):
 * the window, the compressed layers' YaRN factor and native window, the block size, the bridge
 * cap, the decoder's profile and the prefill engine's checkpoint. Regenerated every start, beside the generated front door config.
 */
export function launchEnvText (o: { cfg: DeepseekV4Config, blockSize: number, profile: string, maxBridgeTokens: number, prefillModel: string }): string {
  const compress = o.cfg.rope.compress
  const lines = [
    '# Launch parameters of the embedded stack (pd-bridge serve writes this at every start; edits are not kept).',
    `PD_MAX_MODEL_LEN=${o.cfg.maxPositionEmbeddings}`,
    `PD_ROPE_FACTOR=${compress.factor}`,
    ...(compress.originalMaxPositionEmbeddings === null ? [] : [`PD_ORIGINAL_MAX_POS=${compress.originalMaxPositionEmbeddings}`]),
    `PD_BLOCK_SIZE=${o.blockSize}`,
    `PD_MAX_BRIDGE_TOKENS=${o.maxBridgeTokens}`,
    `PD_DECODER_PROFILE=${o.profile}`,
    `PD_PREFILL_MODEL=${o.prefillModel}`,
  ]
  return lines.join('\n') + '\n'
}

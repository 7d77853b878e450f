// `pd-bridge prefill-engine`: the embedded prefill engine with the capture hook, served over HTTP
// until SIGINT or SIGTERM. Prints one JSON line on stdout when ready; logs JSON lines on stderr.
import { Command } from 'commander'
import { ConfigError } from '../../errors.ts'
import { apiKeyFromEnv, keyRequiredProblem } from '../../http/api-key.ts'

// Plain decimal integers only: "1e3", "0x10", "1.5" and "-1" are refused, not reinterpreted.
function integerFlag (flag: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(Number(text))) throw new ConfigError(flag, `must be a non-negative integer, got ${JSON.stringify(text)}`)
  return Number(text)
}

interface Flags {
  model: string
  sidecar: string
  captureRoot: string
  host: string
  port: string
  profile: string
  maxQueue?: string
  maxTokens?: string
  memoryBudget?: string
  spillCapture?: boolean
  maxChunk?: string
  maxBodyBytes?: string
  maxCarryBytes?: string
}

/** PD_CAPTURE_SPILL: `1` or `true` streams every capture (--spill-capture); anything else set is an error. */
function spillFromEnv (env: NodeJS.ProcessEnv = process.env): boolean {
  const v = env.PD_CAPTURE_SPILL
  if (v === undefined || v === '' || v === '0' || v === 'false') return false
  if (v === '1' || v === 'true') return true
  throw new ConfigError('PD_CAPTURE_SPILL', `must be 1, true, 0 or false, got ${JSON.stringify(v)}`)
}

/** The prefill-engine command. */
export const prefillEngineCommand = new Command('prefill-engine')
  .description('run the embedded prefill engine (capture hook on, prefix caching off) behind an HTTP API: POST /v1/prefill, GET /v1/prefill/{id}, PUT /v1/carry/{id}, /health, /v1/models')
  .requiredOption('--model <dir>', 'checkpoint directory (config.json, safetensors, tokenizer.json)')
  .requiredOption('--sidecar <dir>', "the decoder's exported sidecar (sidecar.json + weights.safetensors)")
  .requiredOption('--capture-root <dir>', 'where capture directories are written (created if absent); one engine per root')
  .option('--host <host>', 'interface to listen on', '127.0.0.1')
  .option('--port <n>', 'TCP port, 0 for any free one', '0')
  .option('--profile <name>', 'numerics profile of the engine', 'prefill')
  .option('--max-queue <n>', 'requests that may wait behind the running one (default 16)')
  .option('--max-tokens <n>', "longest prompt accepted (default: the model's max_position_embeddings)")
  .option('--memory-budget <bytes>', 'default capture memory budget; past it the capture seals a prefix (default: none)')
  .option('--spill-capture', 'stream each capture: boundary snapshots and pooled rows go to disk as computed, so capture memory does not grow with the prompt (same files); also PD_CAPTURE_SPILL=1')
  .option('--max-chunk <n>', 'tokens per engine call; status and health answer between calls (default 512)')
  .option('--max-body-bytes <n>', 'largest request body (default 1 MiB + 16 bytes per --max-tokens)')
  .option('--max-carry-bytes <n>', 'largest carry a warm-extended request may send with PUT /v1/carry/{id} (default 64 GiB)')
  .action(async (flags: Flags) => {
    const port = integerFlag('--port', flags.port)
    if (port !== undefined && port > 65535) throw new ConfigError('--port', `${port} is not a TCP port (0..65535)`)
    const apiKey = apiKeyFromEnv()
    const keyProblem = keyRequiredProblem(flags.host, apiKey)
    if (keyProblem !== null) throw new ConfigError('--host', keyProblem)
    // Loaded on use: the engine, the native kernels and the capture hook cost nothing to other commands.
    const { startPrefillEngine } = await import('../../engines/prefill/index.ts')
    const engine = await startPrefillEngine({
      model: flags.model,
      sidecar: flags.sidecar,
      captureRoot: flags.captureRoot,
      host: flags.host,
      port,
      profile: flags.profile,
      maxQueue: integerFlag('--max-queue', flags.maxQueue),
      maxTokens: integerFlag('--max-tokens', flags.maxTokens),
      memoryBudgetBytes: integerFlag('--memory-budget', flags.memoryBudget),
      spillCapture: flags.spillCapture === true || spillFromEnv(),
      maxChunk: integerFlag('--max-chunk', flags.maxChunk),
      maxBodyBytes: integerFlag('--max-body-bytes', flags.maxBodyBytes),
      maxCarryBytes: integerFlag('--max-carry-bytes', flags.maxCarryBytes),
      apiKey,
    })
    process.stdout.write(JSON.stringify({
      event: 'ready',
      url: engine.url,
      pid: process.pid,
      model: engine.model,
      profile: engine.profile,
      sidecar_fingerprint: engine.sidecarFingerprint,
      max_tokens: engine.maxTokens,
      recovered_failed: engine.recovery.markedFailed,
    }) + '\n')
    await new Promise<void>((resolve) => {
      const stop = (signal: NodeJS.Signals): void => {
        process.off('SIGINT', stop)
        process.off('SIGTERM', stop)
        // A second signal means "now": exit at once; the running manifest stays `running`, which no
        // reader trusts and the next start seals as failed.
        const now = (): void => process.exit(1)
        process.once('SIGINT', now)
        process.once('SIGTERM', now)
        engine.close(signal).then(() => {
          process.off('SIGINT', now)
          process.off('SIGTERM', now)
          resolve()
        }, (err: unknown) => {
          process.stderr.write(`pd-bridge prefill-engine: error while stopping: ${(err as Error).message}\n`)
          process.exitCode = 1
          resolve()
        })
      }
      process.on('SIGINT', stop)
      process.on('SIGTERM', stop)
    })
  })

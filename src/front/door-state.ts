// What one front door keeps between requests: its config (with the spool it settled on), the key's
// headers, the bridge queue and the tokenizer, what the decoder last said about itself (the model
// it serves, its completion limits), the bridge setups per model name, and the counters /health
// shows. The request handlers (generation.ts, health.ts, passthrough.ts) share it.
import type { KeyObject } from 'node:crypto'
import type { Logger } from 'pino'
import type { FrontConfig } from '../config/index.ts'
import type { PrefixCacheEvent } from '../decode/prefix-cache/index.ts'
import { authHeaders } from '../http/api-key.ts'
import { checkLink, decoderFacts, decoderModels } from './links.ts'
import { PrefixClaims } from './prefix-claims.ts'
import { BridgeQueue } from './queue.ts'
import { clearInflight, retireInterrupted } from './reconcile.ts'
import { pathRedactor, type Redactor } from './redact.ts'
import type { DecoderKind } from '../decoders/kind.ts'
import { decoderKind } from '../decoders/registry.ts'
import { buildSetup, type BridgeSetup } from './setup.ts'
import { PromptTokenizer } from './tokenize.ts'

export class FrontState {
  /** What every request to the decoder, the prefill engine and the share carries. */
  readonly auth: Record<string, string>
  /** The config with the spool directory settled (ours when share.url is set and none was given). */
  readonly effective: FrontConfig
  readonly queue: BridgeQueue
  /** Bridges in flight by the tokens they capture (a shared prefix is prefilled once). */
  readonly prefixes = new PrefixClaims()
  readonly tokenizer: PromptTokenizer
  readonly redact: Redactor
  /** The decoder's kind (decoder.engine), whose record says what its store and request rules are. */
  readonly kind: DecoderKind
  /** The decoder's completion and body limits, from its /health (the embedded decoder reports them). */
  decoderLimits: { maxTokens: number, maxPositions: number, maxBodyBytes?: number } | undefined
  /** The decoder's last /health body that answered in time: what a busy decoder is judged by (link-report.ts). */
  decoderHealth: Record<string, unknown> | undefined
  /** When (Date.now()) decoderHealth answered: busy-ness lasts deadlines.decoderBusyMs from it. */
  decoderHealthAt: number | undefined
  /** The model the decoder last said it serves: block keys are hashed with it. */
  decoderModel: string | undefined
  /** Moving average of a bridge's time, for the 429's Retry-After. */
  bridgeMsAverage = 0
  closing = false
  readonly counts = { requests: 0, bridged: 0, declined: 0 }
  private readonly setups = new Map<string, Promise<BridgeSetup>>()
  private modelIds: { at: number, ids: string[], embedded: boolean } | undefined
  private readonly stopLater = new AbortController()
  private readonly later = new Set<Promise<void>>()

  constructor (readonly config: FrontConfig, readonly logger: Logger, readonly apiKey: string | undefined, readonly spoolDir: string | undefined,
    /** The deployment's block key: what the writer stamps on every block (absent: blocks are not authenticated). */
    readonly blockKey?: KeyObject) {
    this.kind = decoderKind(config.decoder.engine)
    this.auth = authHeaders(apiKey)
    this.effective = { ...config, capture: { ...config.capture, spoolDir } }
    this.queue = new BridgeQueue(config.queue.maxWaiting, config.queue.concurrentBridges)
    this.tokenizer = new PromptTokenizer(config.limits.tokenizeWorkerBytes)
    this.redact = pathRedactor(config, spoolDir)
  }

  /** Keep what the decoder's /health said about its model and limits. */
  noteFacts (facts: ReturnType<typeof decoderFacts>): void {
    if (facts.model !== undefined) this.decoderModel = facts.model
    if (facts.maxTokens !== undefined && facts.maxPositions !== undefined) this.decoderLimits = { maxTokens: facts.maxTokens, maxPositions: facts.maxPositions, maxBodyBytes: facts.maxBodyBytes }
  }

  /** Ask the decoder's /health now unless its model (when not configured) and, with `limits`, its limits are known. */
  async learnDecoderFacts (limits: boolean): Promise<void> {
    const modelKnown = this.config.decoder.modelName !== undefined || this.decoderModel !== undefined
    if (modelKnown && (!limits || this.decoderLimits !== undefined)) return
    this.noteFacts(decoderFacts((await checkLink('decoder', this.config.decoder.url, this.config.deadlines.linkMs, this.auth)).health))
  }

  private readonly storeLog = (event: PrefixCacheEvent): void => {
    if (event.kind === 'refused' || event.kind === 'unreadable' || event.kind === 'restore-rejected' || event.kind === 'geometry-miss') this.logger.warn({ event: `store.${event.kind}`, detail: event }, `store: ${event.kind}`)
  }

  /** The setup for the decoder's model name (configured, or what the decoder says it serves). */
  async setupFor (decoderModel: string | undefined): Promise<BridgeSetup> {
    const name = this.config.decoder.modelName ?? decoderModel
    if (name === undefined) throw new Error('the decoder did not say which model it serves (its /health has no model); set decoder.modelName (PD_MODEL_NAME)')
    // A decoder shows a model name that is a path only to holders of the key (src/http/redact.ts).
    if (/^<[\w.-]+>/.test(name)) throw new Error(`the decoder names its model by a path it shows only with the key (${name}); set decoder.modelName (PD_MODEL_NAME) to its --model-name, or PD_API_KEY on both`)
    let setup = this.setups.get(name)
    if (setup === undefined) {
      setup = buildSetup(this.effective, this.kind, name, this.storeLog, this.blockKey)
      this.setups.set(name, setup)
      // A failed setup (a file not there yet) is tried again on the next request.
      setup.catch(() => this.setups.delete(name))
    }
    return await setup
  }

  /**
   * Retire later the capture of bridge `requestId`, whose delete did not reach the engine (killed,
   * restarting): once the engine answers for it again, as a dead front door's interrupted capture
   * is (reconcile.ts), and only then its in-flight mark goes. In the background; logged as
   * `capture-retired`. Stopped by `stopRetiring` (the mark stays for the next front door).
   */
  retireLater (requestId: string): void {
    const p = (async () => {
      const retention = await retireInterrupted(this.effective, requestId, this.auth, this.stopLater.signal, true)
      const done = retention === 'deleted' || retention === 'already gone'
      if (done && this.spoolDir !== undefined) await clearInflight(this.spoolDir, requestId)
      this.logger.info({ event: 'capture-retired', request_id: requestId, retention }, done ? 'capture retired after its delete failed' : 'capture still to be retired: its in-flight mark stays')
    })().catch((e: unknown) => { this.logger.error({ err: e, request_id: requestId }, 'retiring a capture failed') })
    this.later.add(p)
    void p.finally(() => this.later.delete(p))
  }

  /** Stop the retirements still waiting (their marks stay for the next front door). */
  async stopRetiring (): Promise<void> {
    this.stopLater.abort()
    await Promise.all(this.later)
  }

  /** The decoder's served model ids and whether it is the embedded decoder, cached for 5 s (empty when it cannot be asked). */
  async servedModels (): Promise<{ ids: string[], embedded: boolean }> {
    if (this.modelIds !== undefined && Date.now() - this.modelIds.at < 5000) return this.modelIds
    try {
      this.modelIds = { at: Date.now(), ...await decoderModels(this.config.decoder.url, this.config.deadlines.linkMs, this.auth) }
    } catch {
      return { ids: [], embedded: false }
    }
    return this.modelIds
  }
}

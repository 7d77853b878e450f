// Every link checked now, and the geometry each reports held against the front door's setup: what
// /health shows, and the pre-flight of a bridge (its first problem is the declined reason).
import type { FrontState } from './door-state.ts'
import { checkLink, decoderFacts, type LinkState } from './links.ts'
import { promptMismatch } from './prompt-agreement.ts'
import { missingForBridge, type BridgeSetup } from './setup.ts'

export interface LinkReport {
  decoder: LinkState
  /** The decoder is there: it answered, or it is busy and answered before (its facts are that answer's). */
  decoderUp: boolean
  prefill?: LinkState
  share?: LinkState
  /** Everything that stops a bridge, in the order a request would meet it. */
  problems: string[]
  setup?: BridgeSetup
}

/** Check every link and the geometry each reports; `problems` is empty when a bridge can run. */
export async function linkReport (state: FrontState): Promise<LinkReport> {
  const { config, auth } = state
  const d = config.deadlines
  const [decoder, prefill, share] = await Promise.all([
    checkLink('decoder', config.decoder.url, d.linkMs, auth),
    config.prefill.url !== undefined ? checkLink('prefill engine', config.prefill.url, d.linkMs, auth) : undefined,
    config.share.url !== undefined ? checkLink('share', config.share.url, d.linkMs, auth) : undefined,
  ])
  // A busy decoder (it accepts connections but its /health missed the deadline, as while it decodes
  // a batch on a loaded machine) is not a dead one: its last answer's facts stand, and the forward's
  // own deadline (decoderHeadersMs) judges the request. One never heard from cannot be checked.
  // Busy lasts deadlines.decoderBusyMs from its last answer: a decoder hung for longer is down.
  if (decoder.ok && decoder.health !== undefined) {
    state.decoderHealth = decoder.health
    state.decoderHealthAt = Date.now()
  }
  const busyUp = decoder.busy === true && state.decoderHealthAt !== undefined && Date.now() - state.decoderHealthAt <= d.decoderBusyMs
  const decoderHealth = decoder.ok ? decoder.health : busyUp ? state.decoderHealth : undefined
  const report: LinkReport = { decoder, decoderUp: decoder.ok || decoderHealth !== undefined, prefill, share, problems: [] }
  const off = missingForBridge(config)
  if (off !== undefined) {
    report.problems.push(off)
    return report
  }
  if (!report.decoderUp) report.problems.push(`decoder ${decoder.busy === true ? 'not answering' : 'unreachable'}: ${decoder.error}`)
  // A busy engine (connected, no answer in time) is not a problem: the bridge waits its turn and
  // the submit decides (202, or `prefill engine busy`); the capture manifest still pins the sidecar.
  if (prefill !== undefined && !prefill.ok && prefill.busy !== true) report.problems.push(`prefill engine unreachable: ${prefill.error}`)
  if (share !== undefined && !share.ok) report.problems.push(`share ${share.busy === true ? 'not answering' : 'unreachable'}: ${share.error}`)
  const facts = decoderFacts(decoderHealth)
  state.noteFacts(facts)
  let setup: BridgeSetup | undefined
  try {
    setup = await state.setupFor(facts.model)
    report.setup = setup
  } catch (e) {
    report.problems.push(`bridge unavailable: ${(e as Error).message}`)
    return report
  }
  if (setup.problem !== undefined) report.problems.push(setup.problem)
  const prompts = promptMismatch(facts, setup.tokenizer, config.decoder.model as string)
  if (prompts !== undefined) report.problems.push(prompts)
  if (facts.model !== undefined && facts.model !== setup.modelName) report.problems.push(`model mismatch: the decoder serves '${facts.model}', the front door keys blocks under '${setup.modelName}' (decoder.modelName)`)
  if (facts.blockSize !== undefined && facts.blockSize !== setup.blockSize) report.problems.push(`geometry mismatch: the decoder's block size is ${facts.blockSize}, the front door's ${setup.blockSize} (decoder.blockSize, PD_BLOCK_SIZE)`)
  if (facts.geometryFingerprint !== undefined && facts.geometryFingerprint !== setup.target.geometryFingerprint) {
    report.problems.push(`geometry mismatch: the decoder's store geometry is ${facts.geometryFingerprint}, the front door computes ${setup.target.geometryFingerprint} from ${config.decoder.model} under ${state.kind.geometrySource(config.decoder)}; bridged caches would never be served`)
  }
  const engineSidecar = prefill?.health?.sidecar_fingerprint
  if (typeof engineSidecar === 'string' && engineSidecar !== setup.sidecar.fingerprint) {
    report.problems.push(`geometry mismatch: the prefill engine captures under sidecar ${engineSidecar}, the front door expects ${setup.sidecar.fingerprint} (${config.sidecar})`)
  }
  return report
}

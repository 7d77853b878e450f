// GET /health: every link checked now (link-report.ts), the store, the sidecar, the capture mode,
// the queue, the routing rules and the counters. 200 when the decoder answers, 503 when it does not;
// without the key only liveness ({ ok, status }), and never an absolute path.
import { readdir } from 'node:fs/promises'
import type { FastifyReply } from 'fastify'
import type { FrontState } from './door-state.ts'
import { linkReport } from './link-report.ts'
import { decoderFacts, type LinkState } from './links.ts'
import { redactDeep } from './redact.ts'

/** Answer /health; `anonymous`: the request came without the key. */
export async function answerHealth (state: FrontState, anonymous: boolean, reply: FastifyReply): Promise<FastifyReply> {
  const { config, spoolDir, queue, tokenizer, counts } = state
  const links = await linkReport(state)
  const setup = links.setup
  // A busy decoder (there, answered before, too slow now) keeps the front door up; a dead one does not.
  const ok = links.decoderUp
  // Up with a busy decoder is degraded: it answers, late; past deadlines.decoderBusyMs it is down.
  const status = state.closing ? 'shutting_down' : !ok ? 'down' : links.problems.length > 0 || !links.decoder.ok ? 'degraded' : 'ok'
  // Without the key: liveness only, no URL, path, problem or count.
  if (anonymous) return reply.code(ok ? 200 : 503).send({ ok, status })
  const view = (l: LinkState | undefined): object | null => l === undefined ? null : { ok: l.ok, url: l.url, ms: l.ms, ...(l.busy === true ? { busy: true } : {}), ...(l.error !== undefined ? { error: l.error } : {}) }
  let spoolEntries: number | null = null
  // Request folders only: the lock and the in-flight marks (reconcile.ts) are dot entries.
  if (spoolDir !== undefined) spoolEntries = await readdir(spoolDir).then((l) => l.filter((n) => !n.startsWith('.')).length, () => null)
  return reply.code(ok ? 200 : 503).send(redactDeep({
    ok,
    front: 'pd',
    status,
    bridge: { ready: links.problems.length === 0, problems: links.problems },
    links: {
      decoder: { ...view(links.decoder), ...decoderFacts(links.decoder.health ?? (links.decoderUp ? state.decoderHealth : undefined)) },
      prefill: view(links.prefill),
      share: view(links.share),
      store: setup === undefined
        ? { ok: false, dir: config.decoder.cacheDir ?? null }
        : { ok: true, dir: config.decoder.cacheDir, model_name: setup.modelName, block_size: setup.blockSize, geometry_fingerprint: setup.target.geometryFingerprint,
          engine: setup.target.kind, blocks: setup.target.size(), bytes: setup.target.totalBytes() },
      sidecar: setup === undefined
        ? { ok: false, dir: config.sidecar ?? null }
        : { ok: true, dir: setup.sidecar.dir, fingerprint: setup.sidecar.fingerprint, block_size: setup.sidecar.json.blockSize, profile: setup.sidecar.json.profile.name },
      capture: { mode: config.share.url !== undefined ? 'share' : config.capture.dir !== undefined ? 'local' : 'none', dir: config.capture.dir ?? null, spool_dir: spoolDir ?? null, spool_entries: spoolEntries },
    },
    queue: { ...queue.view, when_full: config.queue.whenFull },
    routing: { min_tokens: config.routing.minTokens, min_tail: config.routing.minTail, max_bridge_tokens: config.routing.maxBridgeTokens, block_size: config.decoder.blockSize },
    requests: counts,
    tokenize: tokenizer.stats,
  }, state.redact))
}

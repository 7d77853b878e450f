// `pd-bridge doctor`: check every link of a deployment, from its front door config or from the
// embedded stack's state directory. Each link is asked over HTTP for what it says it is, and the
// answers are compared with each other and with the files (sidecar, store) the config names.
import { mkdir, stat } from 'node:fs/promises'
import { isAbsolute, join, resolve } from 'node:path'
import { loadSidecar, type Sidecar } from '../../capture/index.ts'
import { loadFrontConfig, type FrontConfig } from '../../config/index.ts'
import { getProfile, profileFingerprint } from '../../model/profiles/index.ts'
import { probeStoreWrite } from '../../engines/decoder/store-probe.ts'
import { isAlive, readStackRecord, type StackRecord } from '../record.ts'
import { checkBlockAuthentication } from './blocks.ts'
import { Checklist, type DoctorReport } from './checks.ts'
import { clockSkew, field, probe, type Probe } from './probe.ts'
import { Geometry } from '../../wire/geometry.ts'
import { storeIdentity } from '../../decode/store/index.ts'

/** What to check. */
export interface DoctorOptions {
  /** A front door config file; absent: the embedded stack of `stateDir`. */
  config?: string
  stateDir: string
  /** PD_* overrides for a config file (default process.env); the embedded stack's config takes none. */
  env?: Record<string, string | undefined>
  /** Per-request deadline (default: the config's deadlines.linkMs). */
  timeoutMs?: number
  /** Largest clock difference accepted, in ms (default 2000: HTTP dates have 1-second resolution). */
  maxSkewMs?: number
}

/** How far a link's clock may be from ours before it is a failure. */
const DEFAULT_MAX_SKEW_MS = 2000

interface Where { source: string, configFile?: string, frontUrl?: string, record?: StackRecord, env: Record<string, string | undefined>, missing?: string }

async function locate (o: DoctorOptions): Promise<Where> {
  if (o.config !== undefined) return { source: `config ${resolve(o.config)}`, configFile: o.config, env: o.env ?? process.env }
  const record = await readStackRecord(join(o.stateDir, 'stack.json'))
  if (record !== undefined) {
    return { source: `embedded stack in ${o.stateDir} (supervisor pid ${record.supervisorPid})`, configFile: record.frontConfig, frontUrl: record.frontUrl, record, env: {} }
  }
  // The config the stack generated at its last start (run/front.json; front.json beside it holds your settings).
  const last = join(o.stateDir, 'run', 'front.json')
  const exists = await stat(last).then(() => true, () => false)
  if (exists) return { source: `embedded stack in ${o.stateDir} (not running: no stack.json)`, configFile: last, env: {}, missing: `no stack is running from ${o.stateDir} (no stack.json); checking the links of its last config`}
  return { source: `embedded stack in ${o.stateDir}`, env: {}, missing: `nothing to check in ${o.stateDir}: no stack.json and no run/front.json (start one with \`pd-bridge serve\`, or pass --config FILE)` }
}

/**
 * A health probe judged: answered 200 with status "ok". The decoder may also answer 200 with
 * "degraded" (it answers prompts but cannot store blocks): up, judged by the store check.
 */
function healthy (p: Probe, degradedIsUp = false): string | undefined {
  if (!p.ok) return p.problem
  if (p.status !== 200) return `/health answered HTTP ${p.status}`
  const status = field(p.body, 'status')
  if (status === 'degraded' && degradedIsUp) return undefined
  if (status !== 'ok') return `/health says status ${JSON.stringify(status)}`
  return undefined
}

/**
 * A real write: a probe file (a leading dot, outside every hex shard directory, so the block scan
 * never matches it) created, filled with two pages, fsynced and removed. A full disk fails it
 * where access() or a write of a few bytes kept inline in the file system's metadata would pass.
 */
async function writable (dir: string): Promise<string | undefined> {
  try {
    await mkdir(dir, { recursive: true })
  }
  catch (err) {
    return `${dir}: cannot create it (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`
  }
  const c = await probeStoreWrite(dir)
  return c.writable ? undefined : `${dir}: cannot write (${c.code ?? c.error})`
}

/** What the decoder's own /health says about its store: undefined when it can write, else why not. */
function decoderStoreProblem (decoder: unknown): string | undefined {
  const store = field(decoder, 'store')
  if (store === null || typeof store !== 'object') return undefined
  const problems: string[] = []
  if (field(store, 'writable') === false) problems.push(`the decoder cannot write its store ${String(field(store, 'dir'))} (${String(field(store, 'code') ?? 'error')}): ${String(field(store, 'error'))}`)
  const last = field(store, 'last_write_failure')
  if (field(store, 'writes_failing') === true && last !== null && typeof last === 'object') {
    problems.push(`its last block write failed at ${String(field(last, 'at'))} (${String(field(last, 'code') ?? 'error')}, ${String(field(store, 'write_failures'))} failed since start)`)
  }
  return problems.length > 0 ? `${problems.join('; ')}; prompts are answered, but no block is stored and nothing can be bridged` : undefined
}

/** Run every check and return the report (it never throws for a broken deployment: that is the report). */
export async function runDoctor (options: DoctorOptions): Promise<DoctorReport> {
  const list = new Checklist()
  const where = await locate(options)
  if (where.missing !== undefined) list.fail('stack', where.missing)
  if (where.configFile === undefined) return list.report(where.source)

  // 1. The config.
  let config: FrontConfig
  try {
    const loaded = await loadFrontConfig({ file: where.configFile, env: where.env })
    config = loaded.config
    list.pass('config', `${loaded.file ?? where.configFile} is valid${loaded.env.length > 0 ? ` (with ${loaded.env.join(', ')})` : ''}`)
  }
  catch (err) {
    list.fail('config', (err as Error).message)
    return list.report(where.source)
  }
  const timeoutMs = options.timeoutMs ?? config.deadlines.linkMs

  // 2. The embedded stack's processes.
  if (where.record !== undefined) {
    const r = where.record
    const dead = r.processes.filter((p) => !isAlive(p.pid))
    if (!isAlive(r.supervisorPid)) list.fail('processes', `the supervisor (pid ${r.supervisorPid}) is not running; stack.json is stale`)
    else if (dead.length > 0) list.fail('processes', dead.map((p) => `${p.name} (pid ${p.pid}) is not running`).join('; '))
    else list.pass('processes', r.processes.map((p) => `${p.name} ${p.pid}`).join(', '))
  }

  // 3. Reachability: every link's /health, at once.
  const frontUrl = where.frontUrl ?? (config.listen.port === 0 ? undefined : `http://${config.listen.host}:${config.listen.port}`)
  const links: Array<{ name: string, url: string | undefined }> = [
    { name: 'front door', url: frontUrl },
    { name: 'decoder', url: config.decoder.url },
    { name: 'prefill engine', url: config.prefill.url },
    { name: 'share', url: config.share.url },
  ]
  const probes = new Map<string, Probe>()
  await Promise.all(links.map(async (l) => {
    // The front door's /health asks its own links first, each within deadlines.linkMs: allow for that.
    const deadline = l.name === 'front door' ? timeoutMs + config.deadlines.linkMs : timeoutMs
    if (l.url !== undefined) probes.set(l.name, await probe(`${l.url.replace(/\/$/, '')}/health`, deadline))
  }))
  const up = (name: string): boolean => { const p = probes.get(name); return p !== undefined && healthy(p, name === 'decoder') === undefined }
  for (const l of links) {
    const p = probes.get(l.name)
    if (p === undefined) {
      if (l.name === 'front door') list.warn(l.name, 'listens on port 0 in the config, so its URL is not known here; not checked')
      else if (l.name === 'prefill engine') list.warn(l.name, 'no prefill.url in the config: bridging is off, every request is served natively')
      else if (l.name === 'share') {
        if (config.capture.dir === undefined) list.fail(l.name, 'neither share.url nor capture.dir is configured: captures cannot reach the block writer')
        else {
          const ok = await stat(config.capture.dir).then((s) => s.isDirectory(), () => false)
          if (ok) list.pass(l.name, `no share; captures are read from ${config.capture.dir}`)
          else list.fail(l.name, `no share, and capture.dir ${config.capture.dir} is not a directory here`)
        }
      }
      continue
    }
    const problem = healthy(p)
    if (problem === undefined) list.pass(l.name, `${l.url} answers /health (${p.ms} ms)`)
    else if (l.name === 'decoder' && p.ok && healthy(p, true) === undefined) {
      // Degraded: it answers every prompt; why (its store) is judged by the store check below.
      const why = field(p.body, 'degraded')
      list.warn(l.name, `${l.url} answers /health (${p.ms} ms) with status "degraded"${Array.isArray(why) && why.length > 0 ? `: ${why.join('; ')}` : ''}`)
    }
    else if (l.name === 'front door' && p.ok) {
      // It answers; what it finds wrong with its links is judged link by link below, not twice.
      const seen = field(p.body, 'bridge', 'problems')
      list.warn(l.name, `${l.url} answers (HTTP ${p.status}) with status ${JSON.stringify(field(p.body, 'status'))}${Array.isArray(seen) && seen.length > 0 ? `: ${seen.join('; ')}` : ''}`)
    }
    else list.fail(l.name, `${l.url}: ${problem}`)
  }
  const decoderHealth = up('decoder') ? (probes.get('decoder') as Probe & { ok: true }).body : undefined
  const prefillHealth = up('prefill engine') ? (probes.get('prefill engine') as Probe & { ok: true }).body : undefined
  if (prefillHealth !== undefined && field(prefillHealth, 'prefix_caching') !== false) {
    list.fail('prefix caching', 'the prefill engine reports prefix caching on: a cached prefix feeds the capture hook nothing, and the decoder waits for rows that never come')
  }

  // 4. Versions and geometry: the sidecar against the decoder and the prefill engine.
  let sidecar: Sidecar | undefined
  if (config.sidecar === undefined) list.warn('sidecar', 'no sidecar in the config: its fingerprint cannot be compared with the decoder\'s geometry')
  else {
    try {
      sidecar = await loadSidecar(config.sidecar)
      list.pass('sidecar', `${sidecar.dir}: ${sidecar.json.format}, profile ${sidecar.profile.name} v${sidecar.profile.version}, fingerprint ${sidecar.fingerprint.slice(0, 12)}, verified`)
    }
    catch (err) {
      list.fail('sidecar', (err as Error).message)
    }
  }
  checkVersions(list, config, sidecar, decoderHealth, prefillHealth)
  checkGeometry(list, config, sidecar, decoderHealth, prefillHealth)
  checkLimits(list, config, decoderHealth, prefillHealth)

  // 5. The store and the spool: writable here, and the store the one the decoder serves from; its blocks authenticated or not.
  if (config.decoder.cacheDir === undefined) list.warn('store', 'no decoder.cacheDir in the config: the block writer has nowhere to write')
  else {
    const problem = await writable(config.decoder.cacheDir)
    const served = field(decoderHealth, 'cache', 'dir')
    const decoderSays = decoderStoreProblem(decoderHealth)
    if (problem !== undefined) list.fail('store', decoderSays === undefined ? problem : `${problem}; ${decoderSays}`)
    else if (decoderSays !== undefined) list.fail('store', `${config.decoder.cacheDir} is writable here, but ${decoderSays}`)
    else {
      // Without the key the decoder names no path (`<cacheDir>`): its store's identity stands for it.
      const servedId = field(decoderHealth, 'cache', 'dir_id')
      const known = typeof served === 'string' && isAbsolute(served)
      const other = known ? resolve(served) !== resolve(config.decoder.cacheDir) : typeof servedId === 'string' && servedId !== storeIdentity(config.decoder.cacheDir)
      if (other) list.fail('store', `the config writes blocks to ${resolve(config.decoder.cacheDir)} but the decoder serves from ${known ? resolve(served) : `another directory (store id ${String(servedId)})`}`)
      else list.pass('store', `${config.decoder.cacheDir} is writable${known || typeof servedId === 'string' ? ' and is the decoder\'s store' : ''}`)
    }
  }
  checkBlockAuthentication(list, decoderHealth)
  if (config.capture.spoolDir !== undefined) {
    const problem = await writable(config.capture.spoolDir)
    if (problem !== undefined) list.fail('spool', problem)
    else list.pass('spool', `${config.capture.spoolDir} is writable`)
  }

  // 6. Clocks: every link's Date header against ours.
  const maxSkew = options.maxSkewMs ?? DEFAULT_MAX_SKEW_MS
  const skews: string[] = []
  for (const [name, p] of probes) {
    if (!p.ok || p.date === undefined) continue
    const skew = clockSkew(p.date, p.sent, p.received)
    if (Math.abs(skew) > maxSkew) skews.push(`${name} is ${(skew / 1000).toFixed(1)} s ${skew > 0 ? 'ahead' : 'behind'}`)
  }
  const dated = [...probes.values()].filter((p) => p.ok && p.date !== undefined).length
  if (dated === 0) list.skip('clocks', 'no link answered with a Date header')
  else if (skews.length > 0) list.fail('clocks', `${skews.join('; ')} (more than ${maxSkew / 1000} s): deadlines and block timestamps disagree across machines`)
  else list.pass('clocks', `${dated} link clock${dated > 1 ? 's' : ''} within ${maxSkew / 1000} s of this machine's`)

  return list.report(where.source)
}

function checkVersions (list: Checklist, config: FrontConfig, sidecar: Sidecar | undefined, decoder: unknown, prefill: unknown): void {
  const problems: string[] = []
  const notes: string[] = []
  let profileFp: string | undefined
  try {
    profileFp = profileFingerprint(getProfile(config.decoder.profile))
  }
  catch (err) {
    problems.push(`decoder.profile ${config.decoder.profile}: ${(err as Error).message}`)
  }
  if (sidecar !== undefined && profileFp !== undefined) {
    if (sidecar.json.profileFingerprint !== profileFp) problems.push(`the sidecar's profile ${sidecar.profile.name} v${sidecar.profile.version} is not this build's ${config.decoder.profile} (profile fingerprints ${sidecar.json.profileFingerprint.slice(0, 12)} vs ${profileFp.slice(0, 12)}): re-export the sidecar`)
    else notes.push(`profile ${sidecar.profile.name} v${sidecar.profile.version}`)
  }
  if (decoder !== undefined) {
    const profile = field(decoder, 'profile')
    if (profile !== config.decoder.profile) problems.push(`the decoder runs profile ${JSON.stringify(profile)}, the config says ${config.decoder.profile}`)
    const model = field(decoder, 'model')
    if (config.decoder.modelName !== undefined && model !== config.decoder.modelName) problems.push(`the decoder serves ${JSON.stringify(model)}, the config's decoder.modelName is ${config.decoder.modelName} (block keys would never match)`)
    else notes.push(`decoder serves ${String(model)}`)
  }
  if (prefill !== undefined && sidecar !== undefined) {
    const pp = field(prefill, 'profile')
    notes.push(`prefill engine runs ${String(pp)}`)
  }
  if (problems.length > 0) list.fail('versions', problems.join('; '))
  else if (notes.length === 0) list.skip('versions', 'no sidecar and no decoder answer to compare')
  else list.pass('versions', notes.join(', '))
}

function checkGeometry (list: Checklist, config: FrontConfig, sidecar: Sidecar | undefined, decoder: unknown, prefill: unknown): void {
  if (sidecar === undefined) {
    list.skip('geometry', 'no verified sidecar to compare')
    return
  }
  const problems: string[] = []
  const j = sidecar.json
  // The store's fingerprint is the sidecar's geometry without the exported weights' hash.
  const storeGeometry = Geometry.fromSidecar(j).fingerprint
  if (decoder !== undefined) {
    const g = field(decoder, 'geometry_fingerprint')
    if (g !== storeGeometry) problems.push(`the sidecar gives geometry ${storeGeometry.slice(0, 12)} but the decoder's is ${String(g).slice(0, 12)} (another rope table, window or profile: every bridged block would be a miss)`)
    const maxPos = field(decoder, 'max_position_embeddings')
    if (maxPos !== j.maxPositionEmbeddings) problems.push(`max_position_embeddings: sidecar ${j.maxPositionEmbeddings}, decoder ${String(maxPos)} (the window lives in four places)`)
    const bs = field(decoder, 'cache', 'block_size')
    if (bs !== j.blockSize) problems.push(`block size: sidecar ${j.blockSize}, decoder ${String(bs)}`)
  }
  if (config.decoder.blockSize !== j.blockSize) problems.push(`block size: sidecar ${j.blockSize}, config decoder.blockSize ${config.decoder.blockSize}`)
  if (prefill !== undefined) {
    const fp = field(prefill, 'sidecar_fingerprint')
    if (fp !== sidecar.fingerprint) problems.push(`the prefill engine pools with sidecar ${String(fp).slice(0, 12)}, the config's sidecar is ${sidecar.fingerprint.slice(0, 12)} (re-copy the sidecar to the prefill side and restart it)`)
  }
  if (problems.length > 0) list.fail('geometry', problems.join('; '))
  else if (decoder === undefined && prefill === undefined) list.skip('geometry', 'neither the decoder nor the prefill engine answered')
  else {
    // Two different hashes: the store geometry (rope, window, ratios, profile) and the sidecar's own fingerprint (geometry + exported weights).
    const parts = [
      decoder !== undefined ? `the decoder's store geometry ${storeGeometry.slice(0, 12)} is the sidecar's` : '',
      prefill !== undefined ? `the prefill engine pools with this sidecar (fingerprint ${sidecar.fingerprint.slice(0, 12)})` : '',
    ].filter((s) => s !== '')
    list.pass('geometry', `${parts.join('; ')}; block size ${j.blockSize}`)
  }
}

function checkLimits (list: Checklist, config: FrontConfig, decoder: unknown, prefill: unknown): void {
  const r = config.routing
  const problems: string[] = []
  const engineMax = field(prefill, 'max_tokens')
  const decoderMax = field(decoder, 'max_position_embeddings')
  if (typeof engineMax === 'number' && r.maxBridgeTokens > engineMax) problems.push(`routing.maxBridgeTokens ${r.maxBridgeTokens} is more than the prefill engine accepts (${engineMax}): longer prompts would be refused and fall back`)
  if (typeof decoderMax === 'number' && r.maxBridgeTokens > decoderMax) problems.push(`routing.maxBridgeTokens ${r.maxBridgeTokens} is more than the decoder's max_position_embeddings ${decoderMax}`)
  if (r.minTokens > r.maxBridgeTokens) problems.push(`routing.minTokens ${r.minTokens} is more than routing.maxBridgeTokens ${r.maxBridgeTokens}: nothing is ever bridged`)
  const warnings: string[] = []
  if (r.minTokens < config.decoder.blockSize) warnings.push(`routing.minTokens ${r.minTokens} is less than one block (${config.decoder.blockSize}): prompts shorter than a block have nothing to bridge`)
  if (problems.length > 0) list.fail('limits', problems.join('; '))
  else if (warnings.length > 0) list.warn('limits', warnings.join('; '))
  else list.pass('limits', `bridge prompts of ${r.minTokens} to ${r.maxBridgeTokens} tokens with at least ${r.minTail} uncached${typeof engineMax === 'number' ? `; engine accepts ${engineMax}` : ''}`)
}

// The window-change gate: read the four places, compare the effective rope tables they imply, check
// every limit sized against the window, the decoder's store and the seed ledger, run the hook
// against the decoder above the native window, and require a needle retrieved through the bridge
// above the native window with a fresh seed (the needle law). Nothing here throws for a bad
// deployment: each problem is a finding naming its file and field, and the verdict is pass only
// without failures.
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { PdBridgeError, ConfigError } from '../../src/errors.ts'
import { parseTokenText } from '../../src/decode/prefix-cache/index.ts'
import type { LayerType } from '../../src/model/config.ts'
import type { NumericsProfile } from '../../src/model/profiles/index.ts'
import { bridgeVsNative, type NativeCheckResult } from './native-check.ts'
import { checkNeedleLaw, needleAnswerBudget, needleGeometry, type NeedleGeometry, type NeedleLawSetup } from './needle-check.ts'
import { fmt, type Finding } from './finding.ts'
import { readFrontConfigForGate, mergeFrontConfig } from './front-config.ts'
import { loadLaunchParams, type LaunchParams } from './launch.ts'
import { checkLimits } from './limits.ts'
import { launchPlace, readConfigPlace, readSidecarPlace, type ConfigPlace, type Place, type PlaceName, type SidecarPlace } from './places.ts'
import { renderReport } from './report.ts'
import { showValue, type GateReport } from './gate-report.ts'
import { checkRopeTables, DEFAULT_ANGLE_THRESHOLD, type LayerTypeVerdict, type Outlier } from './rope-check.ts'
import { SeedLedger } from '../needle/seed-ledger.ts'
import { checkSidecarClaims } from './sidecar-check.ts'
import { checkStore, type StoreSurvey } from './store-check.ts'
import { checkStructure } from './structure-check.ts'
import { angleErrorSvg } from './svg-plot.ts'
import { Geometry } from '../../src/wire/geometry.ts'

/** What the gate reads and does. */
export interface GateOptions {
  /** Launch parameters: an env file (KEY=VALUE) or a JSON object of the same keys. */
  launch: string
  /** The prefill node's config.json (or its checkpoint directory). */
  prefillConfig: string
  /** The sidecar directory (sidecar.json + weights.safetensors); default: the --config's sidecar. */
  sidecar?: string
  /** The decoder's config.json (or its checkpoint directory); default: the --config's decoder.model. */
  decoderConfig?: string
  /**
   * The front door's deployment config (src/config): its bridge cap, block size, profile, capture
   * budget and deadlines join the launch values (a disagreement with the launch file fails), and its
   * paths fill the sidecar, decoder, store and model name not given here.
   */
  config?: string
  /** The decoder's checkpoint for the native check; default: the directory of decoderConfig. */
  decoderModel?: string
  /** The decoder's block store root. */
  store?: string
  /** Only blocks of this model name count in the store. */
  modelName?: string
  /** Quarantine blocks of other geometries (rename into <store>/_quarantine/, never delete). */
  fix?: boolean
  /** A seed ledger file (verify/needle/seed-ledger.ts). */
  ledger?: string
  /** Token files (JSON array or whitespace/comma separated ids) to check against the ledger. */
  documents?: string[]
  /** Run the bridge-vs-native check (default true). */
  native?: boolean
  /** Its prompt length; default the original window plus max(64, original/16). */
  nativeTokens?: number
  /** Its prompt seed; default a fresh random seed. */
  seed?: number
  /** The bridged front door for a live needle run (the needle law). */
  needleUrl?: string
  /** The decoder alone, asked the same needle for context only (never evidence). */
  needleNativeUrl?: string
  /** The live needle document's seed; default a fresh random seed. A given seed needs --ledger. */
  needleSeed?: number
  /** The live needle document's length; default original + 2 * block size + 256. */
  needleTokens?: number
  /** Needle run records (files or directories) from protocols/needle.mjs. */
  needleRecords?: string[]
  /** Each live needle leg's time limit (default 600 s). */
  needleTimeoutMs?: number
  /** Set when the gate runs the live needle on its own (no evidence given): a sentence saying so, on its findings. */
  needleSelfRun?: string
  /** Angle error (radians) whose first crossing is reported; default 0.1. */
  angleThreshold?: number
  /** Where report.md, report.json and the SVG plots go; none are written when absent. */
  reportDir?: string
}

function problemFinding (check: string, e: unknown, fallbackFile?: string): Finding {
  if (e instanceof ConfigError) return { check, rule: 'read', status: 'fail', file: e.file ?? fallbackFile, field: e.field, message: e.problem }
  if (e instanceof PdBridgeError) return { check, rule: 'read', status: 'fail', file: fallbackFile, message: e.message }
  throw e
}

async function attempt<T> (check: string, file: string, findings: Finding[], f: () => Promise<T>): Promise<T | undefined> {
  try {
    return await f()
  }
  catch (e) {
    findings.push(problemFinding(check, e, file))
    return undefined
  }
}

/** The default prompt length of the native check: past the original window by max(64, original/16). */
export function defaultNativeTokens (originalMax: number): number {
  return originalMax + Math.max(64, Math.ceil(originalMax / 16))
}

// One finding per (file, field) that puts a place outside the consensus, naming every layer type
// it affects and where each of their tables first differs.
function ropeFindings (rope: LayerTypeVerdict[], threshold: number): Finding[] {
  const out: Finding[] = []
  const byField = new Map<string, { field: string, file: string, text: string, hits: Array<{ layerType: LayerType, outlier: Outlier }> }>()
  for (const v of rope) {
    if (v.outliers.length === 0) {
      out.push({ check: 'rope', rule: v.layerType, status: 'pass', message: `${v.layerType}: ${v.consensus.length}/${v.consensus.length} places imply bit-identical tables` })
    }
    for (const note of v.notes) out.push({ check: 'rope', rule: 'raw-difference', status: 'pass', message: note })
    for (const o of v.outliers) {
      for (const f of o.fields.length > 0 ? o.fields : [null]) {
        const file = f?.source.file ?? o.file
        const field = f?.source.field ?? '(table)'
        const key = `${file}\0${field}`
        const text = f === null
          ? `gives another table than ${o.against} with no differing key`
          : `is ${showValue(f.value)} (${o.place}) but ${showValue(f.consensusValue)} in ${v.consensus.join(', ')}${f.source.note === undefined ? '' : ` [${f.source.note}]`}`
        const seen = byField.get(key) ?? { field, file, text, hits: [] }
        seen.hits.push({ layerType: v.layerType, outlier: o })
        byField.set(key, seen)
      }
    }
  }
  for (const { field, file, text, hits } of byField.values()) {
    // Layer types whose tables first differ at the same entry are named together.
    const byFirst = new Map<string, LayerType[]>()
    for (const h of hits) {
      const at = `position ${fmt(h.outlier.first.position)}, pair ${h.outlier.first.pair} (${h.outlier.first.what})`
      byFirst.set(at, [...(byFirst.get(at) ?? []), h.layerType])
    }
    const where = [...byFirst].map(([at, types]) => `the ${types.join(' and ')} table${types.length > 1 ? 's' : ''} first differ${types.length > 1 ? '' : 's'} at ${at}`).join('; ')
    const angled = hits.find((h) => h.outlier.angle !== undefined)?.outlier.angle
    const crossing = angled === undefined
      ? ''
      : angled.firstExceeding === null
        ? `; the angle error stays under ${threshold} rad over the ${fmt(angled.extent)} shared positions`
        : `; the angle error first exceeds ${threshold} rad at position ${fmt(angled.firstExceeding.position)} (pair ${angled.firstExceeding.pair}, ${angled.firstExceeding.error.toExponential(3)} rad)`
    out.push({ check: 'rope', rule: hits.map((h) => h.layerType).join(','), status: 'fail', file, field, message: `${text}: ${where}${crossing}` })
  }
  return out
}

async function readDocument (file: string): Promise<number[]> {
  let text: string
  try {
    text = await readFile(file, 'utf8')
  }
  catch (e) {
    throw new ConfigError('(file)', `cannot be read: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`, file)
  }
  return parseTokenText(text, file)
}

// What the needle check judges with: the native window, the gate's geometry key, the decoder's
// tokenizer, block size, answer budget and the shortest table; or why it cannot know them.
function needleSetup (decoder: ConfigPlace | undefined, sidecar: SidecarPlace | undefined, launch: LaunchParams | undefined, geometry: NeedleGeometry | undefined, decoderModel: string | undefined): NeedleLawSetup {
  if (decoder === undefined || sidecar === undefined || geometry === undefined) {
    return { ok: false, why: 'the decoder\'s geometry (its config.json and profile) and the sidecar\'s fingerprint are needed, and one of them could not be read' }
  }
  const original = decoder.config.rope.compress.originalMaxPositionEmbeddings ?? launch?.originalMaxPos
  if (original === undefined) return { ok: false, why: 'the decoder runs no YaRN and PD_ORIGINAL_MAX_POS is unknown: no native window to go past' }
  return {
    ok: true,
    ctx: { geometry, original },
    tokenizerDir: resolve(decoderModel ?? decoder.dir),
    blockSize: launch?.blockSize ?? sidecar.json.blockSize,
    budget: needleAnswerBudget(launch?.minAnswerTokens),
    limit: Math.min(decoder.config.maxPositionEmbeddings, launch?.maxModelLen ?? Infinity, sidecar.json.maxPositionEmbeddings),
  }
}

/** Run the whole gate. Deployment problems are findings; only programming errors throw. */
export async function runGate (given: GateOptions): Promise<GateReport> {
  const findings: Finding[] = []
  const threshold = given.angleThreshold ?? DEFAULT_ANGLE_THRESHOLD
  const front = given.config === undefined ? undefined : await attempt('config', given.config, findings, async () => await readFrontConfigForGate(given.config!))
  const opts = {
    ...given,
    sidecar: given.sidecar ?? front?.paths.sidecar,
    decoderConfig: given.decoderConfig ?? front?.paths.decoderModel,
    store: given.store ?? front?.paths.store,
    modelName: given.modelName ?? front?.paths.modelName,
  }
  let launch: LaunchParams | undefined = await attempt('places', opts.launch, findings, async () => await loadLaunchParams(resolve(opts.launch)))
  if (launch !== undefined && front !== undefined) {
    const merged = mergeFrontConfig(launch, front)
    launch = merged.launch
    findings.push(...merged.findings)
  }
  const missing = (what: string, flag: string): undefined => {
    findings.push({ check: 'places', rule: 'read', status: 'fail', message: `no ${what}: give ${flag}${given.config === undefined ? '' : ' (the --config names none)'}` })
    return undefined
  }
  const prefill: ConfigPlace | undefined = await attempt('places', opts.prefillConfig, findings, async () => await readConfigPlace('prefill', opts.prefillConfig))
  const sidecar: SidecarPlace | undefined = opts.sidecar === undefined ? missing('sidecar', '--sidecar') : await attempt('places', opts.sidecar, findings, async () => await readSidecarPlace(opts.sidecar!))
  const decoder: ConfigPlace | undefined = opts.decoderConfig === undefined ? missing('decoder config.json', '--decoder-config') : await attempt('places', opts.decoderConfig, findings, async () => await readConfigPlace('decoder', opts.decoderConfig!))
  const base = prefill ?? decoder
  const places: Partial<Record<PlaceName, Place>> = {}
  if (launch !== undefined && base !== undefined) places.launch = launchPlace(launch, base)
  if (prefill !== undefined) places.prefill = prefill
  if (sidecar !== undefined) places.sidecar = sidecar
  if (decoder !== undefined) places.decoder = decoder
  const read = Object.values(places) as Place[]

  // 1. The effective rope tables, and the layer structure they apply to.
  const rope = read.length >= 2 ? checkRopeTables(read, threshold) : []
  findings.push(...ropeFindings(rope, threshold))
  const structured = [prefill, sidecar, decoder].filter((p) => p !== undefined).map((p) => ({ name: p.name, file: p.file, structure: p.structure! }))
  for (const d of checkStructure(structured)) {
    findings.push({ check: 'structure', rule: 'layers', status: 'fail', file: d.file, field: d.field, message: `is ${d.value} (${d.place}) but ${d.consensusValue} in ${d.against}` })
  }

  // The sidecar's own claims, and the decoder's profile.
  let profile: NumericsProfile | null = null
  if (sidecar !== undefined) {
    const claims = checkSidecarClaims(sidecar, launch)
    findings.push(...claims.findings)
    profile = claims.profile
  }

  // 2. Stale limits.
  if (launch !== undefined) {
    const bytesPerValue = profile === null ? undefined : profile.activations === 'bf16' ? 2 : 4
    findings.push(...checkLimits({ launch, prefill, decoder, sidecar, bytesPerValue }))
  }

  // 3. Cache geometry and reused seeds. The store holds blocks under the decoder's geometry; the
  // ledger (like the needle protocol's) files documents under that and the sidecar's fingerprint,
  // because bridged blocks carry rows the sidecar's rope computed.
  const geometry = decoder !== undefined && profile !== null ? Geometry.fromConfig(decoder.config, profile).fingerprint : undefined
  const ledgerGeometry = geometry !== undefined && sidecar !== undefined ? needleGeometry(geometry, sidecar.json.fingerprint) : undefined
  let store: StoreSurvey | undefined
  if (opts.store !== undefined) {
    if (geometry === undefined) {
      findings.push({ check: 'store', rule: 'geometry', status: 'fail', file: opts.store, message: 'cannot be checked: the decoder\'s geometry needs its config.json and profile, and one of them could not be read' })
    } else {
      const result = await attempt('store', opts.store, findings, async () => await checkStore(resolve(opts.store!), { geometry, modelName: opts.modelName, blockSize: launch?.blockSize ?? sidecar?.json.blockSize, fix: opts.fix }))
      if (result !== undefined) {
        store = result.survey
        findings.push(...result.findings)
      }
    }
  }
  if (opts.ledger !== undefined) {
    await attempt('seeds', opts.ledger, findings, async () => {
      const ledger = await SeedLedger.open(resolve(opts.ledger!))
      const docs = opts.documents ?? []
      if (ledgerGeometry === undefined) throw new PdBridgeError('the seed ledger cannot be checked without the decoder\'s geometry (its config.json and profile) and the sidecar\'s fingerprint')
      const key = ledgerGeometry.key
      const stale = ledger.entries.filter((e) => e.geometry !== key)
      findings.push({ check: 'seeds', rule: 'ledger', status: 'pass', file: ledger.file, message: `${ledger.entries.length} document(s) recorded; ${stale.length} cached under another geometry${stale.length > 0 ? ` (${stale.slice(0, 5).map((e) => JSON.stringify(e.label)).join(', ')}${stale.length > 5 ? ', ...' : ''}): never reuse their prefixes as needles or benchmarks` : ''}` })
      for (const doc of docs) {
        const tokens = await readDocument(doc)
        const reuses = ledger.reuses(tokens, key)
        const foreign = reuses.filter((r) => !r.sameGeometry)
        const same = reuses.filter((r) => r.sameGeometry)
        for (const r of foreign) {
          findings.push({ check: 'seeds', rule: 'reused-seed', status: 'fail', file: doc, message: `shares its first ${fmt(r.sharedTokens)} tokens (${r.sharedBlocks} block(s) of ${fmt(r.entry.blockSize)}) with ${JSON.stringify(r.entry.label)}, cached under another geometry ${r.entry.geometry.slice(0, 16)}: the decoder may serve those tokens from old blocks; use a fresh seed` })
        }
        for (const r of same) {
          findings.push({ check: 'seeds', rule: 'reused-seed', status: 'warn', file: doc, message: `shares its first ${fmt(r.sharedTokens)} tokens with ${JSON.stringify(r.entry.label)} (same geometry): they come from the cache, not from this run's bridge` })
        }
        if (reuses.length === 0) findings.push({ check: 'seeds', rule: 'reused-seed', status: 'pass', file: doc, message: `${fmt(tokens.length)} tokens: no leading block shared with any recorded document` })
      }
    })
  }

  // 4. The hook against the decoder, above the native window.
  let native: NativeCheckResult | undefined
  if (opts.native === false) {
    findings.push({ check: 'native', rule: 'bridge-vs-native', status: 'skip', message: 'not run (--no-native): the gate has not compared the hook with the decoder' })
  } else if (decoder === undefined || sidecar === undefined || profile === null) {
    findings.push({ check: 'native', rule: 'bridge-vs-native', status: 'fail', message: 'cannot run: the decoder config, the sidecar or the decoder profile could not be read' })
  } else {
    const original = decoder.config.rope.compress.originalMaxPositionEmbeddings ?? launch?.originalMaxPos
    const limit = Math.min(decoder.config.maxPositionEmbeddings, launch?.maxModelLen ?? Infinity, sidecar.json.maxPositionEmbeddings)
    const tokens = opts.nativeTokens ?? (original === undefined ? undefined : Math.min(limit, defaultNativeTokens(original)))
    if (tokens === undefined || original === undefined) {
      findings.push({ check: 'native', rule: 'bridge-vs-native', status: 'fail', file: decoder.file, field: 'rope_parameters.compress.original_max_position_embeddings', message: 'the decoder runs no YaRN and PD_ORIGINAL_MAX_POS is unknown: no native window to go past' })
    } else if (tokens <= original) {
      findings.push({ check: 'native', rule: 'bridge-vs-native', status: 'fail', message: `a ${fmt(tokens)}-token prompt does not go past the native window ${fmt(original)} (the shortest table covers ${fmt(limit)} positions)` })
    } else if (tokens > limit) {
      findings.push({ check: 'native', rule: 'bridge-vs-native', status: 'fail', message: `a ${fmt(tokens)}-token prompt runs past the shortest table (${fmt(limit)} positions: the decoder's, the sidecar's and the launch window's smallest)` })
    } else {
      const modelDir = resolve(opts.decoderModel ?? decoder.dir)
      native = await attempt('native', modelDir, findings, async () => await bridgeVsNative({ sidecarDir: sidecar.dir, decoderModelDir: modelDir, profile: profile!, tokens, seed: opts.seed }))
      if (native !== undefined) {
        const head = `${native.summary} on a ${fmt(native.tokens)}-token prompt (seed ${native.seed}), past the native window ${fmt(original)}`
        if (native.differing.length === 0) {
          findings.push({ check: 'native', rule: 'bridge-vs-native', status: 'pass', message: head })
        } else {
          const first = native.differing.slice(0, 3).map((d) => `${d.name}: ${d.detail}`).join('; ')
          findings.push({ check: 'native', rule: 'bridge-vs-native', status: 'fail', file: sidecar.file, message: `${head}: the hook built from the sidecar does not compute the decoder's cache (a stale sidecar?); ${first}${native.differing.length > 3 ? `; and ${native.differing.length - 3} more` : ''}` })
        }
      } else {
        const last = findings[findings.length - 1]
        last.message += ' (pass --decoder-model DIR with the decoder\'s weights, or --no-native)'
      }
    }
  }

  // 5. The needle law: a needle retrieved through the bridge, above the native window, with a fresh seed.
  const needle = await checkNeedleLaw({
    url: opts.needleUrl,
    nativeUrl: opts.needleNativeUrl,
    seed: opts.needleSeed,
    tokens: opts.needleTokens,
    records: opts.needleRecords,
    ledger: opts.ledger,
    legTimeoutMs: opts.needleTimeoutMs,
    selfRun: opts.needleSelfRun,
    recordDir: opts.reportDir === undefined ? undefined : join(resolve(opts.reportDir), 'needle-runs'),
  }, needleSetup(decoder, sidecar, launch, ledgerGeometry, opts.decoderModel))
  findings.push(...needle.findings)

  const failures = findings.filter((f) => f.status === 'fail')
  const warnings = findings.filter((f) => f.status === 'warn').length
  const skipped = findings.filter((f) => f.status === 'skip').length
  const pass = failures.length === 0
  const first = failures[0]
  const firstWhere = first === undefined ? '' : [first.file ?? first.check, first.field].filter((x) => x !== undefined).join(' ')
  const line = pass
    ? `gate: PASS (${findings.filter((f) => f.status === 'pass').length} checks passed, ${warnings} warning(s), ${skipped} skipped)`
    : `gate: FAIL (${failures.length} failure(s); first: ${firstWhere})`
  const report: GateReport = { places, rope, findings, native, store, needle: needle.runs, needleGeometry: ledgerGeometry, plots: new Map(), written: [...needle.written],
    threshold, verdict: { pass, failures: failures.length, warnings, skipped, line } }

  if (opts.reportDir !== undefined) {
    const dir = resolve(opts.reportDir)
    await mkdir(dir, { recursive: true })
    const svgs: Array<[string, string]> = []
    for (const v of rope) {
      for (const o of v.outliers) {
        if (o.angle === undefined) continue
        const file = join(dir, `rope-${v.layerType}-${o.place}.svg`)
        report.plots.set(`${v.layerType}/${o.place}`, file)
        const originalMax = places[o.against]?.rope[v.layerType].params.originalMaxPositionEmbeddings
        svgs.push([file, angleErrorSvg({ title: `${v.layerType}: ${o.place} vs ${o.against}, angle error by position`, inv: o.angle.inv, extent: o.angle.extent, threshold, originalMax })])
      }
    }
    for (const [file, text] of svgs) {
      await writeFile(file, text)
      report.written.push(file)
    }
    const md = join(dir, 'report.md')
    report.reportFile = md
    await writeFile(md, renderReport(report))
    const json = join(dir, 'report.json')
    report.written.unshift(md, json)
    await writeFile(json, JSON.stringify({
      verdict: report.verdict,
      findings,
      native: native === undefined ? null : { ...native },
      needle: { geometry: ledgerGeometry ?? null, runs: needle.runs },
      plots: Object.fromEntries(report.plots),
    }, null, 2) + '\n')
  }
  return report
}

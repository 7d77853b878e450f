// The four places the window lives in (ARCHITECTURE.md section 8), read into one form: for every
// layer type, the rope parameters the place implies, how many positions its table covers, and for
// each parameter the file and field it came from, so a disagreement can be named where it is.
import { readFile, stat } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { parseSidecarJson, SIDECAR_JSON, type SidecarJson } from '../../src/wire/sidecar-format.ts'
import { ConfigError } from '../../src/errors.ts'
import { LAYER_TYPES, parseDeepseekV4Config, type DeepseekV4Config, type LayerType, type RopeParams } from '../../src/model/config.ts'
import type { LaunchParams } from './launch.ts'

/** The four places, in the order reports list them. */
export type PlaceName = 'launch' | 'prefill' | 'sidecar' | 'decoder'

/** Report order of the places. */
export const PLACE_NAMES: readonly PlaceName[] = ['launch', 'prefill', 'sidecar', 'decoder']

/** What a place is, in words. */
export const PLACE_TITLES: Record<PlaceName, string> = {
  launch: 'launch parameters',
  prefill: 'prefill node config.json',
  sidecar: 'sidecar',
  decoder: 'decoder config.json',
}

/** The rope parameters that decide a table, plus its extent (positions covered). */
export type RopeParamName = 'ropeType' | 'theta' | 'factor' | 'originalMaxPositionEmbeddings' | 'betaFast' | 'betaSlow' | 'attentionFactor' | 'ropeDim' | 'extent'

/** Where one value came from: the file, the field in it, and a note (e.g. "absent: default 1.3466"). */
export interface FieldSource {
  file: string
  field: string
  note?: string
}

/** The table a place implies for one layer type. */
export interface PlaceRope {
  params: RopeParams
  /** Positions the table covers: [0, extent). */
  extent: number
  sources: Record<RopeParamName, FieldSource>
}

/** The layer structure a model file states (configs and the sidecar). */
export interface PlaceStructure {
  layerTypes: LayerType[]
  compressRatios: number[]
  slidingWindow: number
  headDim: number
  indexHeadDim: number
  hiddenSize: number
}

/** One place, read. */
export interface Place {
  name: PlaceName
  file: string
  rope: Record<LayerType, PlaceRope>
  /** Absent for the launch parameters (they state no layer structure). */
  structure?: PlaceStructure
}

/** A config.json place, with the parsed config kept for later checks. */
export interface ConfigPlace extends Place {
  config: DeepseekV4Config
  /** The directory the config.json is in (the checkpoint, when weights are next to it). */
  dir: string
}

/** The sidecar place, with its JSON kept for later checks. */
export interface SidecarPlace extends Place {
  json: SidecarJson
  dir: string
}

function isRecord (v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v)
}

async function readText (file: string): Promise<string> {
  try {
    return await readFile(file, 'utf8')
  }
  catch (e) {
    throw new ConfigError('(file)', `cannot be read: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`, file)
  }
}

/** A config.json path from a file or a checkpoint directory. */
export async function configFileOf (pathToFileOrDir: string): Promise<string> {
  const abs = resolve(pathToFileOrDir)
  const isDir = await stat(abs).then((s) => s.isDirectory(), () => false)
  return isDir ? join(abs, 'config.json') : abs
}

// Where config.json keeps each rope value, folded as parseDeepseekV4Config folds them
// (src/model/config/rope-params.ts): a non-empty rope_scaling wins over rope_parameters; nested
// {main, compress} dicts or one flat dict that becomes `compress`, `main` then being plain rope.
function configSources (raw: Record<string, unknown>, kind: 'main' | 'compress', params: RopeParams, file: string): Record<RopeParamName, FieldSource> {
  const scaling = raw.rope_scaling
  const name = isRecord(scaling) && Object.keys(scaling).length > 0 ? 'rope_scaling' : 'rope_parameters'
  const source = isRecord(raw[name]) ? raw[name] as Record<string, unknown> : {}
  const nested = isRecord(source.main) && isRecord(source.compress)
  const at = (field: string, note?: string): FieldSource => note === undefined ? { file, field } : { file, field, note }
  const ropeDimField = raw.partial_rotary_factor != null ? 'partial_rotary_factor' : raw.qk_rope_head_dim != null ? 'qk_rope_head_dim' : 'head_dim'
  const extent = at('max_position_embeddings')
  if (nested) {
    const base = `${name}.${kind}`
    const dict = source[kind] as Record<string, unknown>
    const has = (k: string) => dict[k] !== undefined && dict[k] !== null
    const absent = (k: string, value: number) => has(k) ? undefined : `absent: ${value}`
    return {
      ropeType: at(has('rope_type') ? `${base}.rope_type` : `${base}.type`),
      theta: has('rope_theta') ? at(`${base}.rope_theta`) : at('rope_theta', `${base}.rope_theta absent: the top-level value`),
      factor: at(`${base}.factor`),
      originalMaxPositionEmbeddings: at(`${base}.original_max_position_embeddings`),
      betaFast: at(`${base}.beta_fast`, absent('beta_fast', params.betaFast)),
      betaSlow: at(`${base}.beta_slow`, absent('beta_slow', params.betaSlow)),
      attentionFactor: at(`${base}.attention_factor`, has('attention_factor') || params.ropeType !== 'yarn' ? undefined : `absent: transformers' default ${params.attentionFactor}`),
      ropeDim: has('partial_rotary_factor') ? at(`${base}.partial_rotary_factor`) : at(ropeDimField),
      extent,
    }
  }
  if (kind === 'main') {
    const plain = at('rope_theta', 'sliding layers use plain rope')
    return { ropeType: plain, theta: at('rope_theta'), factor: plain, originalMaxPositionEmbeddings: plain, betaFast: plain, betaSlow: plain, attentionFactor: plain, ropeDim: at(ropeDimField), extent }
  }
  const has = (k: string) => source[k] !== undefined && source[k] !== null
  return {
    ropeType: at(has('rope_type') ? `${name}.rope_type` : `${name}.type`),
    theta: at('compress_rope_theta'),
    factor: at(`${name}.factor`),
    originalMaxPositionEmbeddings: at(`${name}.original_max_position_embeddings`),
    betaFast: at(`${name}.beta_fast`, has('beta_fast') ? undefined : `absent: ${params.betaFast}`),
    betaSlow: at(`${name}.beta_slow`, has('beta_slow') ? undefined : `absent: ${params.betaSlow}`),
    attentionFactor: at(`${name}.attention_factor`, has('attention_factor') ? undefined : 'absent: 1.0 injected for a flat dict'),
    ropeDim: at(ropeDimField),
    extent,
  }
}

/**
 * Read a DeepSeek-V4 config.json (a file, or a checkpoint directory holding one) as a place. A
 * missing or invalid file is a ConfigError naming the file and field.
 */
export async function readConfigPlace (name: 'prefill' | 'decoder', pathToFileOrDir: string): Promise<ConfigPlace> {
  const file = await configFileOf(pathToFileOrDir)
  const text = await readText(file)
  let raw: unknown
  try {
    raw = JSON.parse(text)
  }
  catch (e) {
    throw new ConfigError('(root)', `expected valid JSON: ${(e as Error).message}`, file)
  }
  const config = parseDeepseekV4Config(raw, file)
  const json = raw as Record<string, unknown>
  const ropeOf = (type: LayerType): PlaceRope => {
    const kind = type === 'sliding_attention' ? 'main' : 'compress'
    const params = config.rope[kind]
    return { params, extent: config.maxPositionEmbeddings, sources: configSources(json, kind, params, file) }
  }
  return {
    name,
    file,
    dir: join(file, '..'),
    config,
    rope: Object.fromEntries(LAYER_TYPES.map((t) => [t, ropeOf(t)])) as Record<LayerType, PlaceRope>,
    structure: {
      layerTypes: [...config.layerTypes],
      compressRatios: [...config.compressRatios],
      slidingWindow: config.slidingWindow,
      headDim: config.headDim,
      indexHeadDim: config.indexHeadDim,
      hiddenSize: config.hiddenSize,
    },
  }
}

/** Read a sidecar directory's sidecar.json (schema and cross-field rules; the weights are not read here). */
export async function readSidecarPlace (dir: string): Promise<SidecarPlace> {
  const abs = resolve(dir)
  const file = join(abs, SIDECAR_JSON)
  const json = parseSidecarJson(await readText(file), file)
  const ropeOf = (type: LayerType): PlaceRope => {
    const base = `ropeParameters.${type}`
    const at = (field: string): FieldSource => ({ file, field: `${base}.${field}` })
    return {
      params: json.ropeParameters[type],
      extent: json.maxPositionEmbeddings,
      sources: {
        ropeType: at('ropeType'),
        theta: at('theta'),
        factor: at('factor'),
        originalMaxPositionEmbeddings: at('originalMaxPositionEmbeddings'),
        betaFast: at('betaFast'),
        betaSlow: at('betaSlow'),
        attentionFactor: at('attentionFactor'),
        ropeDim: at('ropeDim'),
        extent: { file, field: 'maxPositionEmbeddings' },
      },
    }
  }
  return {
    name: 'sidecar',
    file,
    dir: abs,
    json,
    rope: Object.fromEntries(LAYER_TYPES.map((t) => [t, ropeOf(t)])) as Record<LayerType, PlaceRope>,
    structure: {
      layerTypes: json.layers.map((l) => l.layerType),
      compressRatios: json.layers.map((l) => l.compressRatio),
      slidingWindow: json.slidingWindow,
      headDim: json.headDim,
      indexHeadDim: json.indexHeadDim,
      hiddenSize: json.hiddenSize,
    },
  }
}

/**
 * The tables the launch parameters imply. Launch flags override a model config the way an
 * engine's flags do: what they set wins (PD_ROPE_FACTOR, PD_ORIGINAL_MAX_POS, the thetas and betas
 * for the layers they concern, PD_MAX_MODEL_LEN as every table's extent); everything else is
 * inherited from `base` (the prefill node's config, which the launched engine reads), and named
 * there. YaRN applies to the compressed layers only; sliding layers keep plain rope.
 */
export function launchPlace (launch: LaunchParams, base: ConfigPlace): Place {
  const lf = launch.file
  const key = (field: string): FieldSource => ({ file: lf, field })
  const inherited = (s: FieldSource): FieldSource => ({ ...s, note: `inherited by the launch parameters${s.note === undefined ? '' : `; ${s.note}`}` })
  const ropeOf = (type: LayerType): PlaceRope => {
    const from = base.rope[type]
    const sources = Object.fromEntries(Object.entries(from.sources).map(([k, s]) => [k, inherited(s)])) as Record<RopeParamName, FieldSource>
    const params: RopeParams = { ...from.params }
    sources.extent = key('PD_MAX_MODEL_LEN')
    if (type === 'sliding_attention') {
      if (launch.ropeTheta !== undefined) {
        params.theta = launch.ropeTheta
        sources.theta = key('PD_ROPE_THETA')
      }
      return { params, extent: launch.maxModelLen, sources }
    }
    if (params.ropeType !== 'yarn') {
      // The base runs plain rope here; the launch factor turns YaRN on with V4's attention factor 1.
      params.ropeType = 'yarn'
      params.attentionFactor = 1
      sources.ropeType = key('PD_ROPE_FACTOR')
      sources.attentionFactor = { ...key('PD_ROPE_FACTOR'), note: 'YaRN turned on by the launch: attention factor 1 (V4 has no mscale)' }
    }
    params.factor = launch.ropeFactor
    sources.factor = key('PD_ROPE_FACTOR')
    params.originalMaxPositionEmbeddings = launch.originalMaxPos
    sources.originalMaxPositionEmbeddings = key('PD_ORIGINAL_MAX_POS')
    if (launch.compressRopeTheta !== undefined) {
      params.theta = launch.compressRopeTheta
      sources.theta = key('PD_COMPRESS_ROPE_THETA')
    }
    if (launch.betaFast !== undefined) {
      params.betaFast = launch.betaFast
      sources.betaFast = key('PD_ROPE_BETA_FAST')
    }
    if (launch.betaSlow !== undefined) {
      params.betaSlow = launch.betaSlow
      sources.betaSlow = key('PD_ROPE_BETA_SLOW')
    }
    return { params, extent: launch.maxModelLen, sources }
  }
  return {
    name: 'launch',
    file: lf,
    rope: Object.fromEntries(LAYER_TYPES.map((t) => [t, ropeOf(t)])) as Record<LayerType, PlaceRope>,
  }
}

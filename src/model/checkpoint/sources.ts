// Which file tensors make each internal tensor of a checkpoint: naming detection, fp8 scale
// companions, per-expert parts, and every check that can be made from the headers alone.
import { CheckpointError } from '../../errors.ts'
import type { Dtype, TensorInfo } from '../../formats/safetensors/index.ts'
import { fp8WeightScaleShape } from '../../numerics/fp8-block-weight.ts'
import type { DeepseekV4Config } from '../config.ts'
import { closestName } from './closest-name.ts'
import { deepseekLayout, sourceNames, type Naming, type SourceName } from './naming.ts'
import { expectedParameters, type ParamSpec } from './params.ts'

/** Tensor names transformers skips on load (multi-token-prediction layers): ignored here too. */
const IGNORED = /(^|\.)mtp\./

/** Float dtypes a tensor may be stored in; F8_E4M3 needs a block-scale companion. */
const FLOAT_DTYPES: readonly Dtype[] = ['F32', 'BF16', 'F16', 'F8_E4M3']
const INT_DTYPES: readonly Dtype[] = ['I64', 'I32']
/** Dtypes a block-scale companion may have: float32 (`weight_scale_inv`), ue8m0 (DeepSeek-V4), bf16. */
const SCALE_DTYPES: readonly Dtype[] = ['F32', 'F8_E8M0', 'BF16']

/** One file tensor that feeds an internal tensor. */
export interface FileSource {
  /** The name in the file. */
  readonly name: string
  readonly dtype: Dtype
  readonly shape: readonly number[]
  /** The fp8 block-scale tensor that goes with an F8_E4M3 weight. */
  readonly scale?: { readonly name: string, readonly dtype: Dtype }
}

/** How one internal tensor is made: one whole tensor, or per expert a row-concatenation of parts. */
export type TensorPlan =
  | { readonly spec: ParamSpec, readonly kind: 'whole', readonly source: FileSource }
  | { readonly spec: ParamSpec, readonly kind: 'experts', readonly parts: readonly (readonly FileSource[])[] }

/** What a checkpoint's headers say about it, before any tensor data is read. */
export interface CheckpointPlan {
  readonly naming: Naming
  /** Whether it uses the hub's original spellings (no `model.` prefix on layers). */
  readonly hubSpelling: boolean
  /** Whether experts come as one 2-D tensor per expert (else stacked 3-D tensors). */
  readonly perExpert: boolean
  readonly tensors: readonly TensorPlan[]
  /** Ignored file tensors (mtp.*). */
  readonly ignored: readonly string[]
}

type Infos = ReadonlyMap<string, TensorInfo>

function showShape (shape: readonly number[]): string {
  return `[${shape.join(', ')}]`
}

/** The weight name an fp8 scale companion belongs to, or null if `name` cannot be one. */
function scaleOwner (name: string): string | null {
  if (name.endsWith('.weight_scale_inv')) return name.slice(0, -'_scale_inv'.length)
  if (name.endsWith('.scale')) return name.slice(0, -'.scale'.length) + '.weight'
  return null
}

/**
 * Plan how to read a checkpoint for `cfg` whose tensors are `infos` (name -> header entry): detect
 * the naming, pair fp8 weights with their scales, group per-expert parts, and check presence,
 * shapes and dtypes. Every problem is a CheckpointError naming the tensor as the file spells it.
 */
export function planCheckpoint (cfg: DeepseekV4Config, infos: Infos, dir?: string): CheckpointPlan {
  const specs = expectedParameters(cfg)
  const known = sourceNames(cfg, specs)
  const ignored: string[] = []
  const scales = new Map<string, string>() // weight name -> scale name
  const candidates: string[] = []
  for (const name of infos.keys()) {
    if (IGNORED.test(name)) { ignored.push(name); continue }
    const owner = scaleOwner(name)
    if (owner !== null && !known.has(name) && infos.get(owner)?.dtype === 'F8_E4M3') {
      const prior = scales.get(owner)
      if (prior !== undefined) throw new CheckpointError(owner, `has two block-scale tensors, ${prior} and ${name}`, dir)
      scales.set(owner, name)
      continue
    }
    candidates.push(name)
  }

  const naming = detectNaming(candidates, known, dir)
  const unknown = candidates.filter((n) => !known.get(n)?.namings.includes(naming))
  if (unknown.length > 0) {
    const pool = [...known].filter(([, s]) => s.namings.includes(naming)).map(([n]) => n)
    const hint = closestName(unknown[0], pool)
    const more = unknown.length > 1 ? ` (and ${unknown.length - 1} more)` : ''
    throw new CheckpointError(unknown[0],
      `unexpected: not a tensor this config implies under ${namingLabel(naming)} names` +
      `${hint === null ? '' : ` (closest expected name: ${hint})`}${more}`, dir)
  }

  const byInternal = new Map<string, { name: string, source: SourceName }[]>()
  for (const name of candidates) {
    const source = known.get(name)!
    let list = byInternal.get(source.internal)
    if (list === undefined) byInternal.set(source.internal, list = [])
    list.push({ name, source })
  }

  const fileSource = (name: string, spec: ParamSpec): FileSource => {
    const info = infos.get(name)!
    const integer = spec.dtype === 'I64'
    const allowed = integer ? INT_DTYPES : FLOAT_DTYPES
    if (!allowed.includes(info.dtype)) {
      throw new CheckpointError(name, `wrong dtype: expected one of ${allowed.join(', ')}, found ${info.dtype}`, dir)
    }
    if (info.dtype !== 'F8_E4M3') return { name, dtype: info.dtype, shape: info.shape }
    const scaleName = scales.get(name)
    if (scaleName === undefined) {
      throw new CheckpointError(name, `is F8_E4M3 but has no block-scale tensor (${name.replace(/\.weight$/, '.scale')} or ${name}_scale_inv)`, dir)
    }
    const scale = infos.get(scaleName)!
    if (info.shape.length !== 2) throw new CheckpointError(name, `is F8_E4M3 with shape ${showShape(info.shape)}: fp8 block scaling needs a 2-D weight`, dir)
    const want = fp8WeightScaleShape(info.shape[0], info.shape[1])
    if (scale.shape.length !== 2 || scale.shape[0] !== want[0] || scale.shape[1] !== want[1]) {
      throw new CheckpointError(scaleName, `wrong shape: a 128x128 block scale of ${showShape(info.shape)} is ${showShape(want)}, found ${showShape(scale.shape)}`, dir)
    }
    if (!SCALE_DTYPES.includes(scale.dtype)) {
      throw new CheckpointError(scaleName, `wrong dtype: a block scale is one of ${SCALE_DTYPES.join(', ')}, found ${scale.dtype}`, dir)
    }
    return { name, dtype: info.dtype, shape: info.shape, scale: { name: scaleName, dtype: scale.dtype } }
  }

  const missing: string[] = []
  const tensors: TensorPlan[] = []
  const savedParts = new Map(deepseekLayout(cfg, specs).filter((s) => s.expert !== undefined).map((s) => [s.name, s.shape]))
  let perExpert = false
  for (const spec of specs) {
    const given = byInternal.get(spec.name) ?? []
    const whole = given.filter((g) => g.source.expert === undefined)
    const parts = given.filter((g) => g.source.expert !== undefined)
    if (whole.length > 0 && parts.length > 0) {
      throw new CheckpointError(whole[0].name, `given twice: as this tensor and as per-expert tensors (${parts[0].name}, ...)`, dir)
    }
    if (whole.length > 1) throw new CheckpointError(whole[0].name, `given twice: also as ${whole[1].name}`, dir)
    if (whole.length === 1) {
      const info = infos.get(whole[0].name)!
      if (!sameShape(info.shape, spec.shape)) {
        throw new CheckpointError(whole[0].name, `wrong shape: expected ${showShape(spec.shape)}, found ${showShape(info.shape)}`, dir)
      }
      tensors.push({ spec, kind: 'whole', source: fileSource(whole[0].name, spec) })
      continue
    }
    if (parts.length === 0) {
      missing.push(nameIn(naming, spec, known))
      continue
    }
    perExpert = true
    const [experts, rows, cols] = spec.shape
    const partCount = Math.max(...parts.map((p) => p.source.part!)) + 1
    const grid: (FileSource | undefined)[][] = Array.from({ length: experts }, () => new Array<FileSource | undefined>(partCount))
    for (const p of parts) {
      const slot = grid[p.source.expert!]
      if (slot[p.source.part!] !== undefined) throw new CheckpointError(p.name, `given twice: also as ${slot[p.source.part!]!.name}`, dir)
      const info = infos.get(p.name)!
      const want = savedParts.get(p.name) ?? [rows / partCount, cols]
      if (!sameShape(info.shape, want)) throw new CheckpointError(p.name, `wrong shape: expected ${showShape(want)}, found ${showShape(info.shape)}`, dir)
      slot[p.source.part!] = fileSource(p.name, spec)
    }
    const namesOf = [...known].filter(([, s]) => s.internal === spec.name && s.expert !== undefined && s.namings.includes(naming) && s.hub !== true)
    for (let e = 0; e < experts; e++) {
      for (let k = 0; k < partCount; k++) {
        if (grid[e][k] === undefined) {
          missing.push(namesOf.find(([, s]) => s.expert === e && s.part === k)?.[0] ?? `${spec.name}[${e}]`)
        }
      }
    }
    tensors.push({ spec, kind: 'experts', parts: grid as FileSource[][] })
  }
  if (missing.length > 0) {
    const more = missing.length > 1 ? ` (and ${missing.length - 1} more missing)` : ''
    throw new CheckpointError(missing[0], `missing from the checkpoint${more}`, dir)
  }
  const hubSpelling = candidates.some((n) => known.get(n)?.hub === true)
  return { naming, hubSpelling, perExpert, tensors, ignored }
}

function sameShape (a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i])
}

/** How a naming is called in messages. */
export function namingLabel (naming: Naming): string {
  return naming === 'deepseek' ? 'DeepSeek (save_pretrained / hub)' : 'transformers module'
}

/** The name a missing internal tensor would have in `naming`. */
function nameIn (naming: Naming, spec: ParamSpec, known: ReadonlyMap<string, SourceName>): string {
  if (naming === 'transformers') return spec.name
  for (const [name, s] of known) {
    if (s.internal === spec.name && s.namings.includes('deepseek') && s.hub !== true && s.expert === undefined) return name
  }
  return spec.name
}

/**
 * The naming the candidates use: names only one naming has decide it; both present is an error
 * that names one of each. With no deciding name (an empty or foreign file), DeepSeek's, whose
 * missing-tensor message then names what save_pretrained would have written.
 */
function detectNaming (candidates: readonly string[], known: ReadonlyMap<string, SourceName>, dir?: string): Naming {
  const only: Record<Naming, string[]> = { transformers: [], deepseek: [] }
  for (const name of candidates) {
    const namings = known.get(name)?.namings
    if (namings?.length === 1) only[namings[0]].push(name)
  }
  if (only.transformers.length > 0 && only.deepseek.length > 0) {
    throw new CheckpointError(only.deepseek[0],
      `mixes both namings: this is a DeepSeek name, but ${only.transformers[0]} is a transformers module name ` +
      `(${only.deepseek.length} DeepSeek-only and ${only.transformers.length} transformers-only names); a checkpoint uses one`, dir)
  }
  return only.transformers.length > 0 ? 'transformers' : 'deepseek'
}

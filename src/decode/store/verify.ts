// Two block directories compared block by block: paired by hash, metadata compared field by field
// (all but created_at and content_sha256; JSON fields compared parsed), tensors by name, dtype, shape
// and every bit, and each side's content checked against its own content digest.
// Placeholders are "no data": two placeholders agree, and a placeholder against real state is one
// difference, not a cascade of tensor mismatches.
import { SafetensorsFile, DTYPE_BITS, type Dtype, type Tensor } from '../../formats/safetensors/index.ts'
import { bf16ToF32 } from '../../numerics/bf16.ts'
import { f16ToF32 } from '../../numerics/f16.ts'
import { listBlockDir, requireDirectory } from './block-file.ts'
import { blockContentDigest } from './content-digest.ts'
import { planLayers, type LayerRef } from './decode.ts'
import { META } from './metadata.ts'
import { jsonEqual, tryParseJson, type JsonValue } from '../../wire/python-json.ts'

/** The verdict on one hash. */
export interface BlockComparison {
  hash: string
  status: 'identical' | 'different' | 'only-a' | 'only-b'
  /** One sentence per difference. */
  differences: string[]
}

/** The verdict on two directories. */
export interface VerifyReport {
  blocks: BlockComparison[]
  identical: number
  total: number
}

/** Metadata compared as parsed JSON rather than text. */
const JSON_FIELDS = new Set<string>([META.signature, META.layerCacheTypes])

/** mlx-lm writes rotating meta as strings, oMLX's own readers accept ints: "128" and 128 are the same. */
function normalizeMeta (v: JsonValue): JsonValue {
  if (typeof v === 'string' && /^-?(0|[1-9][0-9]*)$/.test(v)) return Number(v)
  if (Array.isArray(v)) return v.map(normalizeMeta)
  if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, normalizeMeta(x)]))
  return v
}

function describe (ref: LayerRef | undefined): string {
  if (ref === undefined) return 'unknown state'
  if (ref.kind === 'placeholder') return 'no data (placeholder)'
  if (ref.kind === 'cache-list') return `a CacheList of ${ref.subs.length}`
  return `a ${ref.state.className ?? 'plain'} state`
}

function tryPlan (file: SafetensorsFile): LayerRef[] | null {
  try {
    const n = Number(file.metadata[META.numLayers])
    const shapes = new Map([...file.tensors].map(([name, t]) => [name, { dtype: t.dtype, shape: t.shape }]))
    return planLayers(file.metadata, n, shapes, file.path)
  } catch {
    return null
  }
}

function layerOf (key: string): number | undefined {
  const m = /^layer_([0-9]+)_/.exec(key)
  return m === null ? undefined : Number(m[1])
}

function elementValue (dtype: Dtype, bytes: Uint8Array, at: number): string {
  const view = new DataView(bytes.buffer, bytes.byteOffset + at)
  switch (dtype) {
    case 'F32': return String(view.getFloat32(0, true))
    case 'F64': return String(view.getFloat64(0, true))
    case 'BF16': return String(bf16ToF32(view.getUint16(0, true)))
    case 'F16': return String(f16ToF32(view.getUint16(0, true)))
    case 'I64': return String(view.getBigInt64(0, true))
    case 'I32': return String(view.getInt32(0, true))
    default: return '0x' + Buffer.from(bytes.subarray(at, at + Math.max(1, DTYPE_BITS[dtype] / 8))).toString('hex')
  }
}

function compareValues (name: string, a: Tensor, b: Tensor): string | null {
  const width = DTYPE_BITS[a.dtype] % 8 === 0 ? DTYPE_BITS[a.dtype] / 8 : 1
  const count = a.data.byteLength / width
  let differing = 0
  let first = -1
  for (let i = 0; i < count; i++) {
    const at = i * width
    let same = true
    for (let k = 0; k < width; k++) if (a.data[at + k] !== b.data[at + k]) { same = false; break }
    if (!same) {
      differing++
      if (first < 0) first = i
    }
  }
  if (differing === 0) return null
  const at = first * width
  return `tensor ${name}: ${differing} of ${count} values differ; first at element ${first}: A ${elementValue(a.dtype, a.data, at)}, B ${elementValue(b.dtype, b.data, at)}`
}

/** Compare two block files that should hold the same block. Returns the differences (empty when identical). */
export async function compareBlockFiles (pathA: string, pathB: string, hash: string): Promise<string[]> {
  const diffs: string[] = []
  const files: (SafetensorsFile | null)[] = []
  for (const [side, path] of [['A', pathA], ['B', pathB]] as const) {
    try {
      files.push(await SafetensorsFile.open(path))
    } catch (e) {
      diffs.push(`${side}: unreadable: ${(e as Error).message}`)
      files.push(null)
    }
  }
  const [a, b] = files
  try {
    if (a === null || b === null) return diffs
    // Every tensor of both sides, read once: the digests need them all, the comparison most.
    const data = new Map<SafetensorsFile, Map<string, Tensor>>()
    for (const f of [a, b]) {
      const m = new Map<string, Tensor>()
      for (const name of f.tensors.keys()) m.set(name, await f.read(name))
      data.set(f, m)
    }
    const read = (f: SafetensorsFile, name: string): Tensor => data.get(f)?.get(name) as Tensor
    for (const [side, f] of [['A', a], ['B', b]] as const) {
      if (f.metadata[META.blockHash] !== hash) diffs.push(`${side}: block_hash ${JSON.stringify(f.metadata[META.blockHash])} does not match the file name`)
      // Each block against its own digest: two blocks can only be the same block if both are intact.
      const stamped = f.metadata[META.contentSha256]
      const computed = blockContentDigest(f.metadata, [...(data.get(f) ?? [])].map(([name, t]) => ({ name, ...t })))
      if (stamped === undefined) diffs.push(`${side}: no ${META.contentSha256} (a block oMLX wrote, or one of ours from before block digests): its content cannot be verified`)
      else if (stamped !== computed) diffs.push(`${side}: content hashes to ${computed}, but ${META.contentSha256} says ${stamped}: changed after it was written`)
    }
    const planA = tryPlan(a)
    const planB = tryPlan(b)
    const skip = new Set<number>()
    const layers = Math.max(planA?.length ?? 0, planB?.length ?? 0)
    for (let i = 0; i < layers; i++) {
      const pa = planA?.[i]?.kind === 'placeholder'
      const pb = planB?.[i]?.kind === 'placeholder'
      if (!pa && !pb) continue
      skip.add(i)
      if (pa !== pb) diffs.push(`layer ${i}: A holds ${describe(planA?.[i])}, B holds ${describe(planB?.[i])}`)
    }

    const keys = [...new Set([...Object.keys(a.metadata), ...Object.keys(b.metadata)])].sort()
    for (const key of keys) {
      // The digest summarizes the rest; its own difference would only repeat what is listed.
      if (key === META.createdAt || key === META.contentSha256) continue
      const layer = layerOf(key)
      if (layer !== undefined && skip.has(layer)) continue
      const va = a.metadata[key]
      const vb = b.metadata[key]
      if (va === undefined || vb === undefined) {
        diffs.push(`metadata ${key}: only in ${va === undefined ? 'B' : 'A'} (${JSON.stringify(va ?? vb)})`)
      } else if (key === META.layerMetaStates) {
        const ma = tryParseJson(va)
        const mb = tryParseJson(vb)
        if (!Array.isArray(ma) || !Array.isArray(mb) || ma.length !== mb.length) {
          if (va !== vb) diffs.push(`metadata ${key}: A ${va}, B ${vb}`)
          continue
        }
        ma.forEach((m, i) => {
          if (!skip.has(i) && !jsonEqual(normalizeMeta(m), normalizeMeta(mb[i]))) diffs.push(`metadata ${key}[${i}]: A ${JSON.stringify(m)}, B ${JSON.stringify(mb[i])}`)
        })
      } else if (JSON_FIELDS.has(key)) {
        const ja = tryParseJson(va)
        const jb = tryParseJson(vb)
        if (ja === undefined || jb === undefined ? va !== vb : !jsonEqual(ja, jb)) diffs.push(`metadata ${key}: A ${va}, B ${vb}`)
      } else if (va !== vb) {
        diffs.push(`metadata ${key}: A ${JSON.stringify(va)}, B ${JSON.stringify(vb)}`)
      }
    }

    const names = [...new Set([...a.tensors.keys(), ...b.tensors.keys()])]
    for (const name of names) {
      const layer = layerOf(name)
      if (layer !== undefined && skip.has(layer)) continue
      const ia = a.tensors.get(name)
      const ib = b.tensors.get(name)
      if (ia === undefined || ib === undefined) {
        diffs.push(`tensor ${name}: only in ${ia === undefined ? 'B' : 'A'}`)
        continue
      }
      if (ia.dtype !== ib.dtype || ia.shape.join(',') !== ib.shape.join(',')) {
        diffs.push(`tensor ${name}: A ${ia.dtype} [${ia.shape.join(',')}], B ${ib.dtype} [${ib.shape.join(',')}]`)
        continue
      }
      // None and zero-size stand-ins carry no data; their markers were compared as metadata.
      const standIn = (f: SafetensorsFile): boolean => f.metadata[`${name}_none`] !== undefined || f.metadata[`${name}_zero_dim`] !== undefined
      if (standIn(a) || standIn(b)) continue
      const diff = compareValues(name, read(a, name), read(b, name))
      if (diff !== null) diffs.push(diff)
    }
    return diffs
  } finally {
    await a?.close()
    await b?.close()
  }
}

/** Pair the blocks of two store directories by hash and compare each pair. */
export async function compareBlockDirs (dirA: string, dirB: string): Promise<VerifyReport> {
  await requireDirectory(dirA)
  await requireDirectory(dirB)
  const list = async (dir: string): Promise<Map<string, string>> =>
    new Map((await listBlockDir(dir)).filter((e) => e.kind === 'block').map((e) => [e.hash, e.path]))
  const a = await list(dirA)
  const b = await list(dirB)
  const hashes = [...new Set([...a.keys(), ...b.keys()])].sort()
  const blocks: BlockComparison[] = []
  for (const hash of hashes) {
    const pa = a.get(hash)
    const pb = b.get(hash)
    if (pa === undefined) blocks.push({ hash, status: 'only-b', differences: ['only in B'] })
    else if (pb === undefined) blocks.push({ hash, status: 'only-a', differences: ['only in A'] })
    else {
      const differences = await compareBlockFiles(pa, pb, hash)
      blocks.push({ hash, status: differences.length === 0 ? 'identical' : 'different', differences })
    }
  }
  return { blocks, identical: blocks.filter((x) => x.status === 'identical').length, total: blocks.length }
}

// model.safetensors.index.json: written byte for byte as transformers writes it, read strictly.
import { SafetensorsError } from '../../errors.ts'
import { compareCodePoints } from './order.ts'
import { StrictJsonError, isJsonObject, jsonTypeName, parseStrictJson, type JsonValue } from './strict-json.ts'

/** The index file name transformers uses. */
export const SHARD_INDEX_NAME = 'model.safetensors.index.json'

/** The single-file checkpoint name. */
export const SINGLE_FILE_NAME = 'model.safetensors'

/** Shard `i` (0-based) of `n`: `model-00001-of-00003.safetensors`, as huggingface_hub names them. */
export function shardFileName (i: number, n: number): string {
  return `model-${String(i + 1).padStart(5, '0')}-of-${String(n).padStart(5, '0')}.safetensors`
}

/** Whether `name` looks like a shard file written by `shardFileName`. */
export function isShardFileName (name: string): boolean {
  return /^model-[0-9]{5}-of-[0-9]{5}\.safetensors$/.test(name)
}

/**
 * A string as Python's `json.dumps` writes it by default (ensure_ascii): `"` and `\` escaped,
 * \b \f \n \r \t by name, every other character outside printable ASCII (0x20..0x7E) as a
 * lowercase `\uXXXX` per UTF-16 unit (so U+10000 and up become a surrogate pair).
 */
export function pythonJsonString (s: string): string {
  let out = '"'
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c === 0x22) out += '\\"'
    else if (c === 0x5c) out += '\\\\'
    else if (c === 0x08) out += '\\b'
    else if (c === 0x0c) out += '\\f'
    else if (c === 0x0a) out += '\\n'
    else if (c === 0x0d) out += '\\r'
    else if (c === 0x09) out += '\\t'
    else if (c < 0x20 || c > 0x7e) out += '\\u' + c.toString(16).padStart(4, '0')
    else out += s[i]
  }
  return out + '"'
}

/** One level of `json.dumps(obj, indent=2, sort_keys=True)` for a flat object. */
function pythonJsonObject (entries: [string, string][], indent: string): string {
  if (entries.length === 0) return '{}'
  const inner = indent + '  '
  const sorted = [...entries].sort((a, b) => compareCodePoints(a[0], b[0]))
  return `{\n${sorted.map(([k, v]) => `${inner}${pythonJsonString(k)}: ${v}`).join(',\n')}\n${indent}}`
}

/**
 * The index file's text exactly as transformers' `save_pretrained` writes it:
 * `json.dumps({"metadata": {...}, "weight_map": {...}}, indent=2, sort_keys=True) + "\n"`.
 * transformers 5 puts `total_parameters` next to `total_size` in metadata; huggingface_hub's own
 * writer has only `total_size`, which is what we write unless `totalParameters` is given.
 */
export function encodeShardIndex (totalSize: number, weightMap: ReadonlyMap<string, string>, totalParameters?: number): string {
  const meta: [string, string][] = [['total_size', String(totalSize)]]
  if (totalParameters !== undefined) meta.push(['total_parameters', String(totalParameters)])
  const map: [string, string][] = [...weightMap].map(([k, v]) => [k, pythonJsonString(v)])
  const root: [string, string][] = [['metadata', pythonJsonObject(meta, '  ')], ['weight_map', pythonJsonObject(map, '  ')]]
  return pythonJsonObject(root, '') + '\n'
}

/** Whether a weight_map value is a bare file name in the checkpoint directory (no path escapes). */
function isPlainFileName (name: string): boolean {
  return name.length > 0 && name !== '.' && name !== '..' && !/[/\\\0]/.test(name)
}

/** Read an index file's weight_map (tensor name -> shard file name), checking its shape strictly. */
export function parseShardIndex (text: string, file: string): Map<string, string> {
  let root: JsonValue
  try {
    root = parseStrictJson(text)
  } catch (e) {
    if (e instanceof StrictJsonError) throw new SafetensorsError(file, `index is not valid JSON: ${e.message}`)
    throw e
  }
  if (!isJsonObject(root)) throw new SafetensorsError(file, `index must be a JSON object, got ${jsonTypeName(root)}`)
  const metadata = root.get('metadata')
  if (metadata !== undefined && !isJsonObject(metadata)) {
    throw new SafetensorsError(file, `index "metadata" must be an object, got ${jsonTypeName(metadata)}`)
  }
  const map = root.get('weight_map')
  if (map === undefined) throw new SafetensorsError(file, 'index has no "weight_map"')
  if (!isJsonObject(map)) throw new SafetensorsError(file, `index "weight_map" must be an object, got ${jsonTypeName(map)}`)
  const out = new Map<string, string>()
  for (const [name, shard] of map) {
    if (typeof shard !== 'string') {
      throw new SafetensorsError(file, `index weight_map entry ${JSON.stringify(name)} must be a file name string, got ${jsonTypeName(shard)}`)
    }
    if (!isPlainFileName(shard)) {
      throw new SafetensorsError(file, `index weight_map entry ${JSON.stringify(name)} points at ${JSON.stringify(shard)}, which is not a plain file name in this directory`)
    }
    out.set(name, shard)
  }
  return out
}

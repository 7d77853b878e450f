// What a writer refuses before it writes a byte: anything the reference reader would reject, or
// that would not read back as what was given.
import { SafetensorsError } from '../../errors.ts'
import { isDtype, isIndex, tensorByteLength, type Dtype } from './dtype.ts'
import { METADATA_KEY } from './header.ts'
import type { Tensor } from './tensor.ts'

const LONE_SURROGATE = /[\uD800-\uDFFF]/u

/** One tensor's place in a file to be written. */
export interface LayoutEntry {
  name: string
  dtype: Dtype
  shape: number[]
}

/** Check a layout entry and return its byte size. */
export function checkLayoutEntry (file: string, entry: LayoutEntry): number {
  if (entry == null || typeof entry !== 'object') throw new SafetensorsError(file, `layout entry must be an object, got ${String(entry)}`)
  const { name, dtype, shape } = entry
  if (typeof name !== 'string') throw new SafetensorsError(file, `tensor name must be a string, got ${typeof name}`)
  const where = `tensor ${JSON.stringify(name)}`
  if (name === METADATA_KEY) throw new SafetensorsError(file, `${where}: the name is reserved for metadata`)
  if (LONE_SURROGATE.test(name)) throw new SafetensorsError(file, `${where}: name holds a lone surrogate (not valid UTF-8)`)
  if (!isDtype(dtype)) throw new SafetensorsError(file, `${where}: unknown dtype ${JSON.stringify(dtype)}`)
  if (!Array.isArray(shape) || !shape.every(isIndex)) {
    throw new SafetensorsError(file, `${where}: shape must be a list of non-negative safe integers, got ${JSON.stringify(shape)}`)
  }
  const size = tensorByteLength(dtype, shape)
  if ('problem' in size) throw new SafetensorsError(file, `${where}: ${size.problem}`)
  return size.bytes
}

/** Check a tensor to be written (its layout and that its data holds exactly its bytes). */
export function checkTensor (file: string, name: string, t: Tensor): void {
  if (t == null || typeof t !== 'object') throw new SafetensorsError(file, `tensor ${JSON.stringify(name)}: not a tensor object`)
  const bytes = checkLayoutEntry(file, { name, dtype: t.dtype, shape: t.shape })
  checkData(file, name, t.data, bytes)
}

/** Check that `data` is a Uint8Array of exactly `bytes` bytes. */
export function checkData (file: string, name: string, data: unknown, bytes: number): asserts data is Uint8Array {
  if (!(data instanceof Uint8Array)) throw new SafetensorsError(file, `tensor ${JSON.stringify(name)}: data must be a Uint8Array`)
  if (data.byteLength !== bytes) {
    throw new SafetensorsError(file, `tensor ${JSON.stringify(name)}: data is ${data.byteLength} bytes, its dtype and shape need ${bytes}`)
  }
}

/** Check metadata is a string->string map of well-formed strings. */
export function checkMetadata (file: string, metadata: unknown): asserts metadata is Record<string, string> | undefined {
  if (metadata === undefined) return
  if (metadata === null || typeof metadata !== 'object' || Array.isArray(metadata)) {
    throw new SafetensorsError(file, `metadata must be a string->string object, got ${metadata === null ? 'null' : typeof metadata}`)
  }
  for (const [key, value] of Object.entries(metadata)) {
    if (typeof value !== 'string') throw new SafetensorsError(file, `metadata ${JSON.stringify(key)} must be a string, got ${typeof value}`)
    if (LONE_SURROGATE.test(key) || LONE_SURROGATE.test(value)) {
      throw new SafetensorsError(file, `metadata ${JSON.stringify(key)} holds a lone surrogate (not valid UTF-8)`)
    }
  }
}

/** The entries of a Map or plain record of tensors, checked. */
export function tensorEntries (file: string, tensors: Map<string, Tensor> | Record<string, Tensor>): [string, Tensor][] {
  if (tensors == null || typeof tensors !== 'object') throw new SafetensorsError(file, 'tensors must be a Map or an object of tensors')
  const entries = tensors instanceof Map ? [...tensors.entries()] : Object.entries(tensors)
  for (const [name, t] of entries) {
    if (typeof name !== 'string') throw new SafetensorsError(file, `tensor name must be a string, got ${typeof name}`)
    checkTensor(file, name, t)
  }
  return entries
}

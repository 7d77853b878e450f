// Whole-file writers in the reference layout: byte-identical to huggingface/safetensors' serialize().
import { constants as bufferConstants } from 'node:buffer'
import { SafetensorsError } from '../../errors.ts'
import { referenceOrder } from './order.ts'
import { SafetensorsStreamWriter, headerLengthPrefix, planLayout } from './stream-writer.ts'
import { checkMetadata, tensorEntries } from './write-checks.ts'
import type { Tensor } from './tensor.ts'

/** The name errors carry when there is no file yet. */
const IN_MEMORY = '<in-memory safetensors>'

/** Tensors in reference order (see `compareReferenceOrder`), checked. */
function orderedTensors (file: string, tensors: Map<string, Tensor> | Record<string, Tensor>): { name: string, dtype: Tensor['dtype'], shape: number[], tensor: Tensor }[] {
  const entries = tensorEntries(file, tensors).map(([name, tensor]) => ({ name, dtype: tensor.dtype, shape: tensor.shape, tensor }))
  return referenceOrder(entries)
}

/**
 * The bytes of a safetensors file holding `tensors`, laid out as the reference writer does
 * (header first, tensors sorted by dtype rank descending then name, back to back). `metadata`
 * (string->string) is written only when it has entries. Limited to what one buffer can hold.
 */
export function serializeSafetensors (tensors: Map<string, Tensor> | Record<string, Tensor>, metadata?: Record<string, string>): Uint8Array {
  checkMetadata(IN_MEMORY, metadata)
  const ordered = orderedTensors(IN_MEMORY, tensors)
  const plan = planLayout(IN_MEMORY, ordered, metadata)
  const total = 8 + plan.header.length + plan.dataLength
  if (total > bufferConstants.MAX_LENGTH) {
    throw new SafetensorsError(IN_MEMORY, `${total} bytes do not fit one buffer; use writeSafetensors or SafetensorsStreamWriter`)
  }
  const out = new Uint8Array(total)
  out.set(headerLengthPrefix(plan.header.length), 0)
  out.set(plan.header, 8)
  const dataStart = 8 + plan.header.length
  ordered.forEach((e, i) => out.set(e.tensor.data, dataStart + plan.entries[i].begin))
  return out
}

/**
 * Write `tensors` to `path` in the reference layout (the same bytes `serializeSafetensors` returns),
 * streaming tensor by tensor, under a temporary name that is renamed into place when complete.
 */
export async function writeSafetensors (path: string, tensors: Map<string, Tensor> | Record<string, Tensor>, metadata?: Record<string, string>): Promise<void> {
  checkMetadata(path, metadata)
  const ordered = orderedTensors(path, tensors)
  const writer = await SafetensorsStreamWriter.create(path, ordered.map(e => ({ name: e.name, dtype: e.dtype, shape: e.shape })), metadata)
  try {
    for (const e of ordered) await writer.write(e.name, e.tensor.data)
  } catch (e) {
    await writer.abort()
    throw e
  }
  await writer.close()
}

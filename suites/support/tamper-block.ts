// Change a stored block as someone who can write the store would: flip a bit of one tensor, then
// recompute `content_sha256` with the published rule, so the plain digest matches again. Only a
// keyed digest (content_hmac_sha256, which needs the block key) can tell. Shared by the
// authentication suites.
import { SafetensorsFile, writeSafetensors, type Tensor } from '../../src/formats/safetensors/index.ts'
import { blockContentDigest } from '../../src/decode/store/index.ts'
import { flipTensorBit } from './flip-bit.ts'

/** Flip bit `bit` of byte `byteOffset` of `tensor` in the block at `path` and stamp the digest of the changed content. */
export async function tamperBlock (path: string, tensor: string, bit = 0, byteOffset = 0): Promise<void> {
  await flipTensorBit(path, tensor, bit, byteOffset)
  const f = await SafetensorsFile.open(path)
  const tensors: Record<string, Tensor> = {}
  for (const name of f.tensors.keys()) tensors[name] = await f.read(name)
  const metadata = { ...f.metadata }
  await f.close()
  metadata.content_sha256 = blockContentDigest(metadata, Object.entries(tensors).map(([name, t]) => ({ name, ...t })))
  await writeSafetensors(path, tensors, metadata)
}

// Flip one bit of a tensor's bytes in a safetensors file, in place, as a disk would: the header
// stays valid, so only a content check can tell. Shared by the store's integrity suites.
import { open } from 'node:fs/promises'
import { SafetensorsFile } from '../../src/formats/safetensors/index.ts'

/** Flip bit `bit` of byte `byteOffset` of tensor `tensor`'s data in the file at `path`. */
export async function flipTensorBit (path: string, tensor: string, bit = 0, byteOffset = 0): Promise<void> {
  const f = await SafetensorsFile.open(path)
  const at = f.dataStart + f.info(tensor).begin + byteOffset
  await f.close()
  const fh = await open(path, 'r+')
  try {
    const byte = new Uint8Array(1)
    await fh.read(byte, 0, 1, at)
    byte[0] ^= 1 << bit
    await fh.write(byte, 0, 1, at)
  } finally {
    await fh.close()
  }
}

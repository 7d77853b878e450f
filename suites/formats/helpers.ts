// Shared by the safetensors suites: temporary directories and fast-check arbitraries for tensors.
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import fc from 'fast-check'
import { DTYPES, tensorByteLength, type Dtype, type Tensor } from '../../src/formats/safetensors/index.ts'

/** A fresh temporary directory, and a function that removes it. */
export async function tempDir (): Promise<{ dir: string, cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'pd-bridge-st-'))
  return { dir, cleanup: async () => await rm(dir, { recursive: true, force: true }) }
}

/** Shapes of rank 0..4 with small dims, zeros included (empty tensors, scalars). */
export const shapeArb = fc.array(fc.integer({ min: 0, max: 5 }), { maxLength: 4 })

/** A tensor of any dtype (sub-byte ones only with a whole number of bytes) holding random bytes. */
export const tensorArb: fc.Arbitrary<Tensor> = fc.tuple(fc.constantFrom(...DTYPES), shapeArb)
  .filter(([dtype, shape]) => 'bytes' in tensorByteLength(dtype, shape))
  .chain(([dtype, shape]) => {
    const n = (tensorByteLength(dtype, shape) as { bytes: number }).bytes
    return fc.uint8Array({ minLength: n, maxLength: n }).map(data => ({ dtype: dtype as Dtype, shape, data }))
  })

/** Names: any Unicode (astral included), never the reserved metadata key. */
export const nameArb = fc.string({ unit: 'binary', maxLength: 10 }).filter(n => n !== '__metadata__')

/** Up to 8 uniquely named tensors. */
export const tensorMapArb = fc.uniqueArray(fc.tuple(nameArb, tensorArb), { selector: e => e[0], maxLength: 8 })
  .map(entries => new Map(entries))

/** Metadata: absent, or a string->string map. */
export const metadataArb = fc.option(
  fc.dictionary(fc.string({ unit: 'binary', maxLength: 8 }), fc.string({ unit: 'binary', maxLength: 12 }), { maxKeys: 4, noNullPrototype: true }),
  { nil: undefined },
)

/** A comparable form of a tensor map: [name, dtype, shape, bytes] sorted by name. */
export function comparable (tensors: Map<string, Tensor>): [string, string, number[], number[]][] {
  return [...tensors].map(([name, t]): [string, string, number[], number[]] => [name, t.dtype, t.shape, [...t.data]])
    .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
}

/** Whether two byte arrays hold the same bytes. */
export function sameBytes (a: Uint8Array, b: Uint8Array): boolean {
  return Buffer.compare(Buffer.from(a.buffer, a.byteOffset, a.byteLength), Buffer.from(b.buffer, b.byteOffset, b.byteLength)) === 0
}

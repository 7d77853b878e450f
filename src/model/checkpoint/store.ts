// The loaded weights of a checkpoint: name -> tensor, with typed accessors.
import { CheckpointError } from '../../errors.ts'
import { viewAs, type Tensor } from '../../formats/safetensors/index.ts'
import { decodeBf16 } from '../../numerics/bf16.ts'

/** Tensors by name, read-only by convention: the typed views share the tensors' memory. */
export class WeightStore {
  /** Wrap loaded tensors (not copied). `dir` only labels errors. */
  constructor (private readonly tensors: ReadonlyMap<string, Tensor>, readonly dir?: string) {}

  /** Every tensor name, in load order. */
  names (): string[] {
    return [...this.tensors.keys()]
  }

  /** Whether `name` is present. */
  has (name: string): boolean {
    return this.tensors.has(name)
  }

  /** Number of tensors. */
  get size (): number {
    return this.tensors.size
  }

  /** The tensor itself (dtype, shape, raw bytes). */
  get (name: string): Tensor {
    const t = this.tensors.get(name)
    if (t === undefined) throw new CheckpointError(name, 'not in this checkpoint', this.dir)
    return t
  }

  /** A copy of the shape. */
  shape (name: string): number[] {
    return [...this.get(name).shape]
  }

  /** The values as float32: F32 tensors as a shared view, BF16 tensors decoded into a new array. */
  f32 (name: string): Float32Array {
    const t = this.get(name)
    if (t.dtype === 'F32') return viewAs(t, 'F32')
    if (t.dtype === 'BF16') return decodeBf16(viewAs(t, 'BF16'))
    throw new CheckpointError(name, `expected an F32 or BF16 tensor to read as float32, found ${t.dtype}`, this.dir)
  }

  /** The bf16 codes of a BF16 tensor (shared view). */
  bf16 (name: string): Uint16Array {
    const t = this.get(name)
    if (t.dtype !== 'BF16') throw new CheckpointError(name, `expected a BF16 tensor, found ${t.dtype}`, this.dir)
    return viewAs(t, 'BF16')
  }

  /** The values of an I64 tensor (shared view). */
  i64 (name: string): BigInt64Array {
    const t = this.get(name)
    if (t.dtype !== 'I64') throw new CheckpointError(name, `expected an I64 tensor, found ${t.dtype}`, this.dir)
    return viewAs(t, 'I64')
  }
}

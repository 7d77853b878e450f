// The GGUF container's vocabulary (llama.cpp's model file, version 3): value types of the metadata,
// the ggml tensor types this project writes and reads, and the file's fixed constants.

/** "GGUF" read as a little-endian u32. */
export const GGUF_MAGIC = 0x46554747
/** The version every current llama.cpp writes and reads. */
export const GGUF_VERSION = 3
/** Alignment of the tensor data when `general.alignment` is absent. */
export const GGUF_DEFAULT_ALIGNMENT = 32

/** Metadata value types, by their numbers in the file. */
export const GGUF_VALUE_TYPE = {
  UINT8: 0, INT8: 1, UINT16: 2, INT16: 3, UINT32: 4, INT32: 5, FLOAT32: 6, BOOL: 7, STRING: 8,
  ARRAY: 9, UINT64: 10, INT64: 11, FLOAT64: 12,
} as const

/** A metadata value type's name. */
export type GgufScalarType = Exclude<keyof typeof GGUF_VALUE_TYPE, 'ARRAY'>

/** One typed metadata value: a scalar, or an array of one scalar type (arrays of arrays are not used here). */
export type GgufValue =
  | { type: 'UINT8' | 'INT8' | 'UINT16' | 'INT16' | 'UINT32' | 'INT32' | 'FLOAT32' | 'FLOAT64', value: number }
  | { type: 'UINT64' | 'INT64', value: bigint }
  | { type: 'BOOL', value: boolean }
  | { type: 'STRING', value: string }
  | { type: 'ARRAY', itemType: 'UINT8' | 'INT8' | 'UINT16' | 'INT16' | 'UINT32' | 'INT32' | 'FLOAT32' | 'FLOAT64', value: number[] }
  | { type: 'ARRAY', itemType: 'UINT64' | 'INT64', value: bigint[] }
  | { type: 'ARRAY', itemType: 'BOOL', value: boolean[] }
  | { type: 'ARRAY', itemType: 'STRING', value: string[] }

/** The ggml tensor types handled here (unquantised only), by their numbers in the file. */
export const GGML_TYPE = { F32: 0, F16: 1, I8: 24, I16: 25, I32: 26, I64: 27, F64: 28, BF16: 30 } as const

/** A ggml tensor type's name. */
export type GgmlType = keyof typeof GGML_TYPE

/** Bytes per element of each handled ggml type. */
export const GGML_TYPE_BYTES: Readonly<Record<GgmlType, number>> = { F32: 4, F16: 2, I8: 1, I16: 2, I32: 4, I64: 8, F64: 8, BF16: 2 }

/**
 * One tensor. `dims` are in ggml order, fastest-varying first: a row-major (numpy) shape
 * [rows, cols] is dims [cols, rows]. `data` holds the elements little-endian.
 */
export interface GgufTensor {
  name: string
  type: GgmlType
  dims: number[]
  data: Uint8Array
}

/** A whole GGUF file in memory. */
export interface GgufFile {
  version: number
  /** Keys in file order. */
  metadata: Map<string, GgufValue>
  tensors: GgufTensor[]
  alignment: number
}

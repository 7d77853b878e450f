// GGUF, llama.cpp's model container: types, writer and reader.
export { GGML_TYPE, GGML_TYPE_BYTES, GGUF_DEFAULT_ALIGNMENT, GGUF_MAGIC, GGUF_VALUE_TYPE, GGUF_VERSION, type GgmlType, type GgufFile, type GgufScalarType, type GgufTensor, type GgufValue } from './types.ts'
export { GGML_MAX_DIMS, GGML_MAX_NAME_BYTES, serializeGguf, writeGgufFile, type GgufTensorSource } from './writer.ts'
export { parseGguf, parseGgufHeader, readGgufHeader, type GgufHeader, type GgufTensorInfo } from './reader.ts'
export { GgufError } from './errors.ts'

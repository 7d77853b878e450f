// llama.cpp's DeepSeek-V4 sequence state: the file's layout (format.ts), reading and writing it,
// the geometry a model and context imply, the guard, building it from our cache, comparing two.
export { LlamaCppStateError } from './errors.ts'
export type { CacheType, LlamaCppState, Pool } from './format.ts'
export { parseLlamaCppState } from './reader.ts'
export { serializeLlamaCppState } from './writer.ts'
export { stateGeometry, type LlamaCppStateGeometry } from './geometry.ts'
export { checkLlamaCppState } from './guard.ts'
export { buildLlamaCppState, type OurCache } from './build.ts'
export { compareStates, sectionDistanceLine, structureDifferences, ULP_BUCKETS, type SectionDistance } from './compare.ts'
export { ggmlHadamardRows } from './hadamard.ts'
export { f16ToF32, f32ToF16 } from './half.ts'
export { ourCacheOf, readCheckedState, writeStateFile } from './files.ts'

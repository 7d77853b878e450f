// DeepSeek-V4 checkpoints as GGUF files for llama.cpp's deepseek4 (node-llama-cpp 3.22.1).
export { checkExpressible, convertTensor, DEEPSEEK4_ARCH, deepseek4Gguf, deepseek4Metadata, deepseek4TensorPlan, EXPERT_GATING_SQRT_SOFTPLUS, ggufDims, GgufExportError, ggufTensorType, GGUF_WEIGHT_TYPES, type GgufTensorPlan, type GgufWeightType } from './deepseek4.ts'
export { idsOnlyTokenizerMetadata, tokenizerMetadata, TOKEN_TYPE } from './tokenizer.ts'
export { checkGgufTarget, exportGguf, type ExportGgufOptions, type ExportedGguf } from './export.ts'

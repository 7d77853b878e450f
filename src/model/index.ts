export { DeepseekV4Engine, ModelCache, LayerCache, CompressorState, type AttnInputHook, type DumpTensor, type LogitsRequest, type PrefillOptions, type PrefillResult } from './engine/index.ts'

// Synthetic DeepSeek-V4 checkpoints: the parameter list, presets, the maker and the loader.
export { expectedParameters, paramDtype, KEEP_IN_FP32_MODULES, type ParamSpec, type ParamDtype, type ParamRole, type InitSpec } from './params.ts'
export { presetConfig, presetConfigJson, isPresetName, PRESET_NAMES, type PresetName } from './presets.ts'
export { initialValues, type ParamValues } from './init.ts'
export { Xoshiro128, streamFor, assertSeed } from './random.ts'
export { makeCheckpoint, makeTensors, checkpointConfigJson, generationConfigJson, type MakeCheckpointOptions, type MadeCheckpoint } from './make.ts'
export { loadCheckpoint, type LoadedCheckpoint } from './load.ts'
export { WeightStore } from './store.ts'
export { checkpointDigest } from './digest.ts'

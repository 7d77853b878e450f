// The deployment config of the front door: the schema, PD_* overrides and the loader.
export { frontConfigSchema, type FrontConfig, type FrontDeadlines } from './front-config.ts'
export { ENV_OVERRIDES, applyEnvOverrides, type EnvOverride } from './env.ts'
export { loadFrontConfig, parseFrontConfig, type LoadedFrontConfig, type LoadFrontConfigOptions } from './load.ts'

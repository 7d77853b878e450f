// Loading the front door's config: read the JSON file, apply PD_* overrides, then validate, so
// every error names the file (or the variable) and the field.
import { readFile } from 'node:fs/promises'
import { resolve } from 'node:path'
import type { z } from 'zod'
import { ConfigError } from '../errors.ts'
import { applyEnvOverrides, ENV_OVERRIDES } from './env.ts'
import { frontConfigSchema, type FrontConfig } from './front-config.ts'

/** Where a loaded config came from. */
export interface LoadedFrontConfig {
  config: FrontConfig
  /** The file read (absolute), if any. */
  file?: string
  /** PD_* variables that were applied. */
  env: string[]
}

/** Options of `loadFrontConfig`. */
export interface LoadFrontConfigOptions {
  /** The JSON config file; absent: defaults and the environment alone. */
  file?: string
  /** Variables to read PD_* from; default process.env. */
  env?: Record<string, string | undefined>
}

function fieldOf (issue: z.core.$ZodIssue): string {
  const path = issue.path.map(String)
  // An unknown key's path is its parent; name the key itself.
  if (issue.code === 'unrecognized_keys') return [...path, issue.keys[0]].join('.')
  return path.length > 0 ? path.join('.') : '(root)'
}

function problemOf (issue: z.core.$ZodIssue): string {
  if (issue.code === 'unrecognized_keys') return `unknown key${issue.keys.length > 1 ? `s ${issue.keys.join(', ')}` : ''}; the config refuses keys it does not know`
  if (issue.code === 'invalid_type' && issue.input === undefined) return 'is required'
  return issue.message
}

/** Which PD_* variable sets `field`, for error messages about overridden values. */
function variableFor (field: string, applied: string[]): string | undefined {
  return ENV_OVERRIDES.find((o) => o.key === field && applied.includes(o.name))?.name
}

/**
 * Validate `raw` (a parsed config object) after the PD_* overrides in `env`. Throws ConfigError
 * naming the field, the file (or `environment` when a variable set the bad value) and the problem.
 */
export function parseFrontConfig (raw: unknown, env: Record<string, string | undefined> = {}, source?: string): { config: FrontConfig, env: string[] } {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw new ConfigError('(root)', 'must be a JSON object', source)
  const { raw: merged, applied } = applyEnvOverrides(raw as Record<string, unknown>, env)
  const parsed = frontConfigSchema.safeParse(merged)
  if (!parsed.success) {
    const issue = parsed.error.issues[0]
    const field = fieldOf(issue)
    const variable = variableFor(field, applied)
    throw new ConfigError(field, problemOf(issue) + (variable !== undefined ? ` (set by ${variable})` : ''), variable !== undefined ? 'environment' : source)
  }
  return { config: parsed.data, env: applied }
}

/** Read, override and validate the front door's config. */
export async function loadFrontConfig (options: LoadFrontConfigOptions = {}): Promise<LoadedFrontConfig> {
  const env = options.env ?? process.env
  if (options.file === undefined) return parseFrontConfig({}, env)
  const file = resolve(options.file)
  let text: string
  try {
    text = await readFile(file, 'utf8')
  } catch (e) {
    const err = e as NodeJS.ErrnoException
    const why = err.code === 'ENOENT' ? 'no such file' : err.code === 'EISDIR' ? 'is a directory, expected a JSON file' : err.message
    throw new ConfigError('(file)', why, file)
  }
  let raw: unknown
  try {
    raw = JSON.parse(text)
  } catch (e) {
    throw new ConfigError('(json)', `not valid JSON: ${(e as Error).message}`, file)
  }
  return { ...parseFrontConfig(raw, env, file), file }
}

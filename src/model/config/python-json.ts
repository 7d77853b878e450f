// config.json text as transformers' save_pretrained writes it: keys sorted, two-space indent, and
// float fields written as floats. That last part is not cosmetic: transformers 5 validates configs
// with huggingface_hub's @strict, which rejects an int (`10`) for a field typed `float`
// (DeepseekV4Config.swiglu_limit, attention_dropout, router_jitter_noise, ...), and JSON.stringify
// writes 10.0 as `10`.

/**
 * Keys whose values transformers holds as Python floats: the `float`-typed DeepseekV4Config fields
 * (plus the `float | int` thetas, which save_pretrained also writes as floats) and the float
 * entries of a nested rope dict. `factor` and the betas are left as given, as transformers does.
 */
export const FLOAT_KEYS: ReadonlySet<string> = new Set([
  'attention_dropout', 'compress_rope_theta', 'hc_eps', 'initializer_range', 'partial_rotary_factor',
  'rms_norm_eps', 'rope_theta', 'routed_scaling_factor', 'router_aux_loss_coef', 'router_jitter_noise',
  'swiglu_limit', 'attention_factor',
])

function write (value: unknown, key: string | undefined, indent: string, floatKeys: ReadonlySet<string>): string {
  if (typeof value === 'number' && key !== undefined && floatKeys.has(key) && Number.isInteger(value)) {
    return `${value}.0`
  }
  if (Array.isArray(value)) {
    if (value.length === 0) return '[]'
    const inner = indent + '  '
    return `[\n${value.map((v) => inner + write(v, undefined, inner, floatKeys)).join(',\n')}\n${indent}]`
  }
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value).sort()
    if (keys.length === 0) return '{}'
    const inner = indent + '  '
    const body = keys.map((k) => `${inner}${JSON.stringify(k)}: ${write((value as Record<string, unknown>)[k], k, inner, floatKeys)}`)
    return `{\n${body.join(',\n')}\n${indent}}`
  }
  return JSON.stringify(value) ?? 'null'
}

/** Sorted-key, two-space JSON with integral values of `floatKeys` written as `N.0`, plus a final newline. */
export function pythonStyleJson (value: unknown, floatKeys: ReadonlySet<string> = FLOAT_KEYS): string {
  return write(value, undefined, '', floatKeys) + '\n'
}

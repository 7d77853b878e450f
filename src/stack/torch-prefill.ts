// The CUDA rung's prefill engine as a stack child: transformers with the torch capture hook
// (src/engines/torch/serve_prefill.py), in place of the embedded TypeScript prefill engine. It
// speaks the same HTTP API (docs/prefill-engine.md), so the share, the front door and the decoder
// are unchanged; it needs a python3 with torch, transformers and aiohttp (docs/torch-rung.md).
import { fileURLToPath } from 'node:url'
import { StackError } from './errors.ts'

/** The server the child runs. */
export const TORCH_PREFILL_SERVER = fileURLToPath(new URL('../engines/torch/serve_prefill.py', import.meta.url))

/** How to run transformers as the prefill engine. */
export interface TorchPrefillEngine {
  /** The interpreter that has torch, transformers and aiohttp (default python3). */
  python: string
  /** torch device: cuda, cuda:1, cpu (default cuda). */
  device: string
  /** The model's dtype on the device (default bf16: loaded in fp32, then cast). */
  dtype: 'bf16' | 'f32'
  /** Tokens per forward (transformers' one-shot prefill ran out of memory at 16K at V4-Flash geometry). */
  maxChunk: number
}

/** The defaults of `--prefill-engine torch`. */
export const TORCH_PREFILL_DEFAULTS: TorchPrefillEngine = { python: 'python3', device: 'cuda', dtype: 'bf16', maxChunk: 4096 }

/** A TorchPrefillEngine from flag values (undefined: the default), each checked. */
export function torchPrefillEngine (flags: { python?: string, device?: string, dtype?: string, maxChunk?: string | number }): TorchPrefillEngine {
  const dtype = flags.dtype ?? TORCH_PREFILL_DEFAULTS.dtype
  if (dtype !== 'bf16' && dtype !== 'f32') throw new StackError(`--torch-dtype ${dtype}: expected bf16 or f32`)
  const device = flags.device ?? TORCH_PREFILL_DEFAULTS.device
  if (!/^(cpu|cuda(:\d+)?)$/.test(device)) throw new StackError(`--torch-device ${device}: expected cpu, cuda or cuda:N`)
  const chunk = flags.maxChunk ?? TORCH_PREFILL_DEFAULTS.maxChunk
  if (!/^\d+$/.test(String(chunk)) || Number(chunk) < 1) throw new StackError(`--torch-max-chunk ${String(chunk)}: expected a positive integer`)
  const python = flags.python ?? TORCH_PREFILL_DEFAULTS.python
  if (python === '') throw new StackError('--torch-python: empty')
  return { python, device, dtype, maxChunk: Number(chunk) }
}

/** The child's argv. */
export function torchPrefillArgv (e: TorchPrefillEngine, paths: { model: string, sidecar: string, captureRoot: string }): string[] {
  return [e.python, '-u', TORCH_PREFILL_SERVER, '--model', paths.model, '--sidecar', paths.sidecar, '--capture-root', paths.captureRoot,
    '--port', '0', '--device', e.device, '--dtype', e.dtype, '--max-chunk', String(e.maxChunk)]
}

/** What a record says the prefill engine was: `transformers bf16 on cuda (NVIDIA H200)`. */
export function torchPrefillLabel (e: TorchPrefillEngine, deviceName: unknown): string {
  const named = typeof deviceName === 'string' && deviceName !== '' ? ` (${deviceName})` : ''
  return `transformers ${e.dtype} on ${e.device}${named}`
}

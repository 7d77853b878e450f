// Debian's CPU torch lives under /usr/bin/python3 only (not the pyenv python3 first on PATH). In CI
// it is installed by .ci/run, so its absence there is a failure; elsewhere the suite is skipped,
// loudly, with the command that installs it.
import { execFileSync, spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { HANG_LIMIT_MS } from '../support/hang-limit.ts'

/** The interpreter that has Debian's python3-torch. */
export const TORCH_PYTHON = '/usr/bin/python3'

/** The torch hook's runner (src/engines/torch/pool_capture.py). */
export const POOL_CAPTURE = fileURLToPath(new URL('../../src/engines/torch/pool_capture.py', import.meta.url))

/** torch's version under TORCH_PYTHON, or why it cannot be imported. */
export function torchAvailability (): { ok: true, version: string } | { ok: false, why: string } {
  const r = spawnSync(TORCH_PYTHON, ['-c', 'import torch, numpy; print(torch.__version__)'], { encoding: 'utf8', timeout: HANG_LIMIT_MS })
  if (r.error !== undefined) return { ok: false, why: `${TORCH_PYTHON} cannot be run: ${r.error.message}` }
  if (r.status !== 0) return { ok: false, why: `${TORCH_PYTHON} cannot import torch and numpy: ${r.stderr.trim().split('\n').pop() ?? ''}` }
  return { ok: true, version: r.stdout.trim() }
}

/** What pool_capture.py prints. */
export interface PoolCaptureResult {
  state: string
  sealedLength: number
  peakHeldBytes: number
  seconds: number
}

/** Run the torch hook on recorded attention inputs as a child process; args as pool_capture.py takes them. */
export function runTorchHook (args: string[]): PoolCaptureResult {
  const out = execFileSync(TORCH_PYTHON, [POOL_CAPTURE, ...args], { encoding: 'utf8', timeout: HANG_LIMIT_MS, maxBuffer: 16 << 20, stdio: ['ignore', 'pipe', 'pipe'] })
  return JSON.parse(out.trim().split('\n').pop() ?? '') as PoolCaptureResult
}

/** Run the torch hook expecting it to fail; returns its stderr (throws if it succeeded). */
export function runTorchHookFailure (args: string[]): string {
  const r = spawnSync(TORCH_PYTHON, [POOL_CAPTURE, ...args], { encoding: 'utf8', timeout: HANG_LIMIT_MS, maxBuffer: 16 << 20 })
  if (r.status === 0) throw new Error(`the torch hook succeeded where it should have refused: ${r.stdout.trim()}`)
  return r.stderr
}

// The CUDA rung's prefill-engine child (src/stack/torch-prefill.ts): its flags are checked before
// anything starts, and the argv names the server, the stack's paths and the engine's settings.
import { describe, expect, it } from 'vitest'
import { existsSync } from 'node:fs'
import { TORCH_PREFILL_DEFAULTS, TORCH_PREFILL_SERVER, torchPrefillArgv, torchPrefillEngine, torchPrefillLabel } from '../../src/stack/torch-prefill.ts'

describe('torchPrefillEngine', () => {
  it('takes the defaults and checked values', () => {
    expect(torchPrefillEngine({})).toEqual(TORCH_PREFILL_DEFAULTS)
    expect(torchPrefillEngine({ python: '/opt/py/bin/python3', device: 'cuda:1', dtype: 'f32', maxChunk: '2048' }))
      .toEqual({ python: '/opt/py/bin/python3', device: 'cuda:1', dtype: 'f32', maxChunk: 2048 })
    expect(torchPrefillEngine({ device: 'cpu', maxChunk: 7 }).maxChunk).toBe(7)
  })

  it.each([
    [{ dtype: 'fp16' }, /--torch-dtype fp16: expected bf16 or f32/],
    [{ device: 'gpu' }, /--torch-device gpu: expected cpu, cuda or cuda:N/],
    [{ maxChunk: '0' }, /--torch-max-chunk 0: expected a positive integer/],
    [{ maxChunk: '1e3' }, /--torch-max-chunk 1e3/],
    [{ python: '' }, /--torch-python: empty/],
  ])('refuses %o', (flags, message) => {
    expect(() => torchPrefillEngine(flags)).toThrow(message)
  })
})

describe('the child', () => {
  it('runs serve_prefill.py unbuffered with the stack\'s paths and port 0', () => {
    expect(existsSync(TORCH_PREFILL_SERVER)).toBe(true)
    const argv = torchPrefillArgv({ ...TORCH_PREFILL_DEFAULTS, python: 'py' }, { model: '/m', sidecar: '/s', captureRoot: '/c' })
    expect(argv).toEqual(['py', '-u', TORCH_PREFILL_SERVER, '--model', '/m', '--sidecar', '/s', '--capture-root', '/c', '--port', '0', '--device', 'cuda', '--dtype', 'bf16', '--max-chunk', '4096'])
  })

  it('is labelled with its dtype, device and GPU', () => {
    expect(torchPrefillLabel(TORCH_PREFILL_DEFAULTS, 'NVIDIA H200')).toBe('transformers bf16 on cuda (NVIDIA H200)')
    expect(torchPrefillLabel({ ...TORCH_PREFILL_DEFAULTS, device: 'cpu', dtype: 'f32' }, '')).toBe('transformers f32 on cpu')
  })
})

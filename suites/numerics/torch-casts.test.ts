// External truth: PyTorch's own casts (CPU and CUDA agree) and ml_dtypes' e2m1 cast, recorded
// as SHA-256 hashes of the codes over a fixed input set by harness/torch_casts.py
// (torch 2.11.0+cu130, ml_dtypes 0.6.0, run on the device machine). A hash mismatch means our
// encoder disagrees with torch somewhere in the set; rerun that script to find where.
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { f32ToBf16 } from '../../src/numerics/bf16.ts'
import { f32ToE2m1 } from '../../src/numerics/e2m1.ts'
import { f32ToE4m3, f32ToE4m3NoSat } from '../../src/numerics/e4m3.ts'
import { f32ToE5m2 } from '../../src/numerics/e5m2.ts'
import { f32ToF16 } from '../../src/numerics/f16.ts'

interface CastRecord {
  count: number
  inputs: string
  hashes: { [name: string]: string }
}
const record = JSON.parse(readFileSync(new URL('./fixtures/torch-casts.json', import.meta.url), 'utf8')) as CastRecord

/** The script's input set: see inputs() in harness/torch_casts.py. NaN bit patterns are dropped. */
function inputBits (): Uint32Array {
  const out: number[] = []
  const push = (b: number) => {
    const nan = (b & 0x7f800000) === 0x7f800000 && (b & 0x7fffff) !== 0
    if (!nan) out.push(b >>> 0)
  }
  for (const off of [0, 1, -1]) {
    for (let high = 0; high < 0x10000; high++) push((high * 0x10000 + off + 2 ** 32) % 2 ** 32)
  }
  for (const sign of [0, 0x80000000]) {
    for (let e = 96; e < 144; e++) {
      for (let m = 0; m < 1024; m++) {
        for (const off of [0, 0x1000, 0xfff, 0x1001]) push((e << 23) | ((m << 13) + off) | sign)
      }
    }
  }
  return new Uint32Array(out)
}

const sha256 = (view: ArrayBufferView) =>
  createHash('sha256').update(new Uint8Array(view.buffer, view.byteOffset, view.byteLength)).digest('hex')

describe('casts agree with PyTorch bit for bit', () => {
  const bits = inputBits()
  const x = new Float32Array(bits.buffer)

  it('uses the same input set as the script', () => {
    expect(bits.length).toBe(record.count)
    expect(sha256(bits)).toBe(record.inputs)
  })

  const casts: Array<[string, (v: number) => number, 16 | 8]> = [
    ['bf16', f32ToBf16, 16],
    ['f16', f32ToF16, 16],
    ['e4m3-nosat', f32ToE4m3NoSat, 8],
    ['e4m3-sat', f32ToE4m3, 8], // torch: x.clamp(-448, 448).to(float8_e4m3fn)
    ['e5m2', f32ToE5m2, 8],
  ]
  for (const [name, encode, width] of casts) {
    it(`${name} matches torch on the CPU and on CUDA`, () => {
      const codes = width === 16 ? new Uint16Array(x.length) : new Uint8Array(x.length)
      for (let i = 0; i < x.length; i++) codes[i] = encode(x[i])
      const hash = sha256(codes)
      expect(hash).toBe(record.hashes[`${name}.cpu`])
      expect(hash).toBe(record.hashes[`${name}.cuda`])
    })
  }

  it('e2m1 (after clamping to ±6) matches ml_dtypes.float4_e2m1fn', () => {
    const codes = new Uint8Array(x.length)
    for (let i = 0; i < x.length; i++) codes[i] = f32ToE2m1(Math.min(6, Math.max(-6, x[i])))
    expect(sha256(codes)).toBe(record.hashes['e2m1-sat.ml_dtypes'])
  })
})

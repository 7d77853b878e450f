// Shared pieces of the fuzz suites: fixed-seed run settings, a judge that sorts every outcome into
// "parsed", "refused with our own error class" or a failure, and JSON / byte mutators.
import fc from 'fast-check'
import { PdBridgeError } from '../../src/errors.ts'

function envInt (name: string, fallback: number): number {
  const v = process.env[name]
  if (v === undefined || v === '') return fallback
  if (!/^\d+$/.test(v)) throw new Error(`${name} must be a non-negative integer, got ${JSON.stringify(v)}`)
  return Number(v)
}

/** Fixed seeds, so every run of the suite tries the same inputs (PD_FUZZ_SEED: protocols/fuzz.mjs's longer runs). */
export const SEED = envInt('PD_FUZZ_SEED', 1)

/** Cases per property: `n` in the suite, `n` x PD_FUZZ_SCALE in a longer protocol run. */
export function runs (n: number): number {
  return n * Math.max(1, envInt('PD_FUZZ_SCALE', 1))
}

/** Tally of one property: cases run, parsed, refused (own error). */
export class Tally {
  runs = 0
  parsed = 0
  refused = 0
  constructor (readonly label: string) {}
  line (): string {
    return `[fuzz] ${this.label}: ${this.runs} cases, ${this.parsed} parsed, ${this.refused} refused with the project's error class`
  }
}

type ErrorClass = abstract new (...args: never[]) => Error

function describeInput (input: unknown): string {
  const s = typeof input === 'string' ? JSON.stringify(input) : input instanceof Uint8Array ? `bytes[${input.length}] ${Buffer.from(input.subarray(0, 200)).toString('hex')}` : safeJson(input)
  return s.length > 600 ? s.slice(0, 600) + '...' : s
}

function safeJson (v: unknown): string {
  try { return JSON.stringify(v) ?? String(v) } catch { return String(v) }
}

// No time bound per case: a wall-clock assertion would depend on how loaded the machine is. A real
// hang in synchronous parsing shows as the test timing out.
function check (tally: Tally, allowed: ErrorClass, input: unknown, error: unknown): void {
  tally.runs++
  if (error === undefined) { tally.parsed++; return }
  if (error instanceof allowed) { tally.refused++; return }
  const e = error as Error
  throw new Error(`${tally.label}: threw ${e?.constructor?.name ?? typeof error} (not ${allowed.name}): ${e?.message ?? String(error)}\n  input: ${describeInput(input)}`)
}

/** Run `f` on `input`; pass if it returns, or throws `allowed` (default PdBridgeError). */
export function judge (tally: Tally, input: unknown, f: () => unknown, allowed: ErrorClass = PdBridgeError): void {
  let error: unknown
  try { f() } catch (e) { error = e ?? new Error('threw undefined') }
  check(tally, allowed, input, error)
}

/** The async form of `judge`. */
export async function judgeAsync (tally: Tally, input: unknown, f: () => Promise<unknown>, allowed: ErrorClass = PdBridgeError): Promise<void> {
  let error: unknown
  try { await f() } catch (e) { error = e ?? new Error('threw undefined') }
  check(tally, allowed, input, error)
}

/** Byte-level edits of a valid input: flips, overwrites, deletions, insertions, truncation. */
export type ByteEdit =
  | { op: 'flip', at: number, bit: number }
  | { op: 'set', at: number, byte: number }
  | { op: 'delete', at: number, n: number }
  | { op: 'insert', at: number, bytes: number[] }
  | { op: 'truncate', at: number }

export const byteEditArb: fc.Arbitrary<ByteEdit> = fc.oneof(
  fc.record({ op: fc.constant('flip' as const), at: fc.nat(), bit: fc.integer({ min: 0, max: 7 }) }),
  fc.record({ op: fc.constant('set' as const), at: fc.nat(), byte: fc.oneof(fc.integer({ min: 0, max: 255 }), fc.constantFrom(0x00, 0x22, 0x2c, 0x30, 0x39, 0x5b, 0x5d, 0x7b, 0x7d, 0x2d, 0x5c, 0xff, 0xc0, 0x80)) }),
  fc.record({ op: fc.constant('delete' as const), at: fc.nat(), n: fc.integer({ min: 1, max: 8 }) }),
  fc.record({ op: fc.constant('insert' as const), at: fc.nat(), bytes: fc.array(fc.integer({ min: 0, max: 255 }), { minLength: 1, maxLength: 8 }) }),
  fc.record({ op: fc.constant('truncate' as const), at: fc.nat() }),
)

/** Apply edits in order (positions taken modulo the current length). */
export function applyByteEdits (base: Uint8Array, edits: readonly ByteEdit[], protect = 0): Uint8Array {
  let b = Array.from(base)
  for (const e of edits) {
    const span = Math.max(1, b.length - protect)
    const at = protect + (e.at % span)
    if (e.op === 'flip') { if (at < b.length) b[at] ^= 1 << e.bit }
    else if (e.op === 'set') { if (at < b.length) b[at] = e.byte }
    else if (e.op === 'delete') b.splice(at, e.n)
    else if (e.op === 'insert') b.splice(at, 0, ...e.bytes)
    else b = b.slice(0, at)
  }
  return Uint8Array.from(b)
}

/** Keys that tend to break naive object code. */
export const nastyKeyArb = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.constantFrom('__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', 'valueOf', '', ' ', '0', 'length'),
)

/** JSON values with edge cases mixed in. */
export const edgeValueArb: fc.Arbitrary<unknown> = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }),
  fc.constantFrom(0, -0, -1, 1, 1.5, 2 ** 31, 2 ** 32, 2 ** 53, 2 ** 53 + 2, -(2 ** 53), 1e308, -1e308, 5e-324, '', ' ', '0', '-1', '1e3', 'NaN', 'Infinity', null, true, false, [], {}, [0], [[]], { '': null }),
)

/** A structural edit of a JSON tree: replace or delete the value at a path, or add a key. */
export interface JsonEdit { path: number, op: 'replace' | 'delete' | 'add', value: unknown, key: string }

export const jsonEditArb: fc.Arbitrary<JsonEdit> = fc.record({
  path: fc.nat(),
  op: fc.constantFrom('replace' as const, 'replace' as const, 'delete' as const, 'add' as const),
  value: edgeValueArb,
  key: nastyKeyArb,
})

function paths (v: unknown, at: (string | number)[] = [], out: (string | number)[][] = []): (string | number)[][] {
  out.push(at)
  if (Array.isArray(v)) v.forEach((x, i) => paths(x, [...at, i], out))
  else if (v !== null && typeof v === 'object') for (const k of Object.keys(v)) paths((v as Record<string, unknown>)[k], [...at, k], out)
  return out
}

/** Apply structural edits to a deep copy of `base` (a JSON value). Edits at the root replace it. */
export function applyJsonEdits (base: unknown, edits: readonly JsonEdit[]): unknown {
  let root: unknown = JSON.parse(JSON.stringify(base))
  for (const edit of edits) {
    // Copy the value: constants are shared between cases and must never be edited in place.
    const e = { ...edit, value: edit.value === undefined ? undefined : JSON.parse(JSON.stringify(edit.value)) as unknown }
    const all = paths(root)
    const path = all[e.path % all.length]
    if (path.length === 0) {
      if (e.op === 'replace') root = e.value
      else if (e.op === 'add' && root !== null && typeof root === 'object' && !Array.isArray(root)) defineOwn(root as Record<string, unknown>, e.key, e.value)
      continue
    }
    const parent = path.slice(0, -1).reduce<any>((a, k) => a[k], root)
    const last = path[path.length - 1]
    if (e.op === 'replace') parent[last] = e.value
    else if (e.op === 'delete') { if (Array.isArray(parent)) parent.splice(last as number, 1); else delete parent[last] }
    else {
      const target = parent[last]
      if (Array.isArray(target)) target.push(e.value)
      else if (target !== null && typeof target === 'object') defineOwn(target, e.key, e.value)
      else parent[last] = e.value
    }
  }
  return root
}

function defineOwn (o: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(o, key, { value, enumerable: true, writable: true, configurable: true })
}

/** Text edits: applied to the UTF-8 bytes of a JSON text, then decoded back (lossily). */
export function mutateText (text: string, edits: readonly ByteEdit[]): string {
  return Buffer.from(applyByteEdits(new TextEncoder().encode(text), edits)).toString('utf8')
}

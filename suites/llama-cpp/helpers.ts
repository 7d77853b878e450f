// Shared by the llama.cpp suites: the checkpoints of the triangle (made fresh, checked against the
// digests their transformers fixtures record), their GGUFs, the three engines' last-64 logits and
// 12 greedy tokens, and the distances printed and asserted.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { readSafetensors, viewAs } from '../../src/formats/safetensors/index.ts'
import { LlamaCppModel } from '../../src/engines/llama-cpp/runner.ts'
import { checkpointDigest, makeCheckpoint } from '../../src/model/checkpoint/index.ts'
import type { MakeCheckpointOptions } from '../../src/model/checkpoint/make.ts'
import { DeepseekV4Engine } from '../../src/model/engine/index.ts'
import { exportGguf } from '../../src/model/gguf/index.ts'
import { relError } from '../engine/helpers.ts'

/** Rows of logits compared (the fixtures hold the last 64 positions) and greedy tokens. */
export const TAIL = 64
export const GREEDY = 12

/** A path under the repository. */
export const repoPath = (p: string) => new URL(`../../${p}`, import.meta.url).pathname

/** One case of the triangle: a checkpoint, a prompt and transformers' fp32 run of it. */
export interface TriangleCase {
  name: string
  /** Which checkpoint: tiny seed 1, tiny seed 1 with mirrored indexer heads, or the transformers-made directory. */
  checkpoint: 'tiny' | 'tiny-mirror' | 'hf-saved'
  fixture: string
  /** Whether the checkpoint's indexer meets exact top-k ties (all but the mirrored one). */
  ties: boolean
}

export const CASES: readonly TriangleCase[] = [
  { name: 'tiny T=301', checkpoint: 'tiny', fixture: 'harness/fixtures/ref-tiny-t301-f32.safetensors', ties: true },
  { name: 'tiny T=1100', checkpoint: 'tiny', fixture: 'harness/fixtures/ref-tiny-t1100-f32.safetensors', ties: true },
  { name: 'hf-saved T=777', checkpoint: 'hf-saved', fixture: 'harness/fixtures/ref-hfsaved-t777-f32.safetensors', ties: true },
  { name: 'tiny-mirror T=301', checkpoint: 'tiny-mirror', fixture: 'suites/llama-cpp/fixtures/ref-tinymirror-t301-f32.safetensors', ties: false },
  { name: 'tiny-mirror T=1100', checkpoint: 'tiny-mirror', fixture: 'suites/llama-cpp/fixtures/ref-tinymirror-t1100-f32.safetensors', ties: false },
]

/** What one engine produced for a prompt: the last 64 rows of logits [64, vocab] and 12 greedy tokens. */
export interface EngineRun {
  logits: Float32Array
  greedy: number[]
}

/** A transformers fixture: prompt, logits tail, greedy tokens, the digest of the checkpoint it came from. */
export interface Reference extends EngineRun {
  ids: number[]
  digest: string
  vocab: number
}

export async function readReference (fixture: string): Promise<Reference> {
  const { metadata, tensors } = await readSafetensors(repoPath(fixture))
  const ints = (n: string) => Array.from(viewAs(tensors.get(n)!, 'I64'), Number)
  const logits = viewAs(tensors.get('oneshot.logits_tail')!, 'F32')
  return { ids: ints('input_ids'), logits, greedy: ints('greedy'), digest: metadata.checkpoint_sha256, vocab: logits.length / TAIL }
}

/** The checkpoints and their f32 GGUFs in one scratch directory. */
export class Checkpoints {
  readonly dir = mkdtempSync(join(tmpdir(), 'pd-bridge-llama-cpp-'))
  private readonly made = new Map<string, Promise<{ model: string, gguf: string, digest: string }>>()

  get (which: TriangleCase['checkpoint']): Promise<{ model: string, gguf: string, digest: string }> {
    let p = this.made.get(which)
    if (p === undefined) {
      p = (async () => {
        let model: string
        if (which === 'hf-saved') model = repoPath('harness/fixtures/hf-saved')
        else {
          model = join(this.dir, which)
          const opts: MakeCheckpointOptions = { preset: 'tiny', seed: 1, out: model, mirrorIndexerHeads: which === 'tiny-mirror' }
          await makeCheckpoint(opts)
        }
        const gguf = join(this.dir, `${which}.gguf`)
        await exportGguf({ model, out: gguf, type: 'f32', idsOnly: which === 'hf-saved' })
        return { model, gguf, digest: await checkpointDigest(model) }
      })()
      this.made.set(which, p)
    }
    return p
  }

  dispose (): void {
    rmSync(this.dir, { recursive: true, force: true })
  }
}

export function argmax (row: ArrayLike<number>): number {
  let best = 0
  for (let i = 1; i < row.length; i++) if (row[i] > row[best]) best = i
  return best
}

/** ||a - ref|| / ||ref|| in float64: the engine suites' own measure. */
export { relError }

/** Our engine in the f32 profile: prefill with the last 64 logits, then 12 greedy picks continuing from that cache (as `pd-bridge dump --greedy`). */
export async function runOurs (model: string, ids: readonly number[]): Promise<EngineRun> {
  const engine = await DeepseekV4Engine.load(model, 'f32')
  const cache = engine.newCache()
  const { logits, vocab } = engine.prefill([...ids], cache, { logits: { tail: TAIL } })
  const greedy: number[] = []
  let row = logits.subarray((TAIL - 1) * vocab)
  for (let i = 0; i < GREEDY; i++) {
    greedy.push(argmax(row))
    if (i + 1 < GREEDY) row = engine.decode(greedy[i], cache)
  }
  return { logits: logits.slice(), greedy }
}

/** llama.cpp on the CPU (f32 GGUF, f32 KV cache, flash attention off, one sequence, the prompt as one batch). */
export async function runLlamaCpp (gguf: string, ids: readonly number[]): Promise<EngineRun> {
  const model = await LlamaCppModel.load(gguf)
  try {
    const session = await model.session({ contextSize: ids.length + GREEDY + 4, kvCacheType: 'F32', flashAttention: false, threads: 2 })
    try {
      const { logits, vocab } = await session.evaluate(ids, TAIL)
      const greedy = await session.greedy(logits.subarray((TAIL - 1) * vocab), GREEDY)
      return { logits, greedy }
    }
    finally {
      await session.dispose()
    }
  }
  finally {
    await model.dispose()
  }
}

/** Distances between two runs over the 64 rows. */
export interface Distance {
  /** Relative error of the whole [64, vocab] block, of the last row, and the worst and median row. */
  tail: number
  last: number
  worstRow: number
  worstAt: number
  medianRow: number
  /** Rows with the same argmax, of 64; greedy tokens equal from the start, of 12. */
  argmax: number
  greedy: number
}

export function distance (a: EngineRun, b: EngineRun, vocab: number): Distance {
  const rows = Array.from({ length: TAIL }, (_, i) => relError(a.logits.subarray(i * vocab, (i + 1) * vocab), b.logits.subarray(i * vocab, (i + 1) * vocab)))
  const sorted = [...rows].sort((x, y) => x - y)
  let argmaxAgree = 0
  for (let i = 0; i < TAIL; i++) if (argmax(a.logits.subarray(i * vocab, (i + 1) * vocab)) === argmax(b.logits.subarray(i * vocab, (i + 1) * vocab))) argmaxAgree++
  let prefix = 0
  while (prefix < GREEDY && a.greedy[prefix] === b.greedy[prefix]) prefix++
  const worst = Math.max(...rows)
  return { tail: relError(a.logits, b.logits), last: rows[TAIL - 1], worstRow: worst, worstAt: rows.indexOf(worst), medianRow: sorted[TAIL / 2], argmax: argmaxAgree, greedy: prefix }
}

const e = (x: number) => x.toExponential(2)

/** One printed line of the distance table. */
export function distanceLine (label: string, pair: string, d: Distance): string {
  return `  ${label.padEnd(20)} ${pair.padEnd(37)} tail ${e(d.tail)}  last ${e(d.last)}  worst row ${e(d.worstRow)} (#${String(d.worstAt).padStart(2)})  median row ${e(d.medianRow)}  argmax ${d.argmax}/${TAIL}  greedy ${d.greedy}/${GREEDY}`
}

// Builder threads for the block writer: reading a block's state, mapping it and encoding its file
// is CPU work per block, independent of every other block, so `n` threads build blocks ahead
// while the writer's thread puts them in the store in order (writer.ts). A thread that fails, or a
// block that cannot be built, rejects that block's promise with the reason; the pool never retries.
import type { KeyObject } from 'node:crypto'
import { once } from 'node:events'
import { Worker } from 'node:worker_threads'
import { PdBridgeError } from '../../errors.ts'
import type { DeepseekV4Config } from '../../model/config.ts'
import type { StorageRule } from '../prefix-cache/index.ts'
import type { StoreLayout } from '../store/index.ts'
import type { BuiltBlock } from './block-build.ts'

/** What a builder thread starts from: the capture's layer files (already checked) and the store's shape. */
export interface BuilderInit {
  layerFiles: Array<{ index: number, path: string }>
  cfg: DeepseekV4Config
  layout: StoreLayout
  storage: StorageRule
  /** The store's block key: a KeyObject crosses to the thread without its bytes ever being in a message of ours. */
  authKey?: KeyObject
}

interface Pending { resolve: (b: BuiltBlock) => void, reject: (e: Error) => void }

interface Builder { worker: Worker, jobs: Map<number, Pending>, stopped?: Error }

/** `n` builder threads for one capture. */
export class BlockBuildPool {
  private readonly builders: Builder[]
  private closed = false

  constructor (readonly threads: number, init: BuilderInit) {
    if (!Number.isSafeInteger(threads) || threads < 1) throw new PdBridgeError(`block writer: builder threads must be a positive integer, got ${String(threads)}`)
    this.builders = Array.from({ length: threads }, () => this.spawn(init))
  }

  private spawn (init: BuilderInit): Builder {
    const worker = new Worker(new URL('./build-worker.mjs', import.meta.url), { workerData: init })
    const b: Builder = { worker, jobs: new Map() }
    worker.on('message', (m: { k: number, built?: BuiltBlock, error?: string }) => {
      const p = b.jobs.get(m.k)
      if (p === undefined) return
      b.jobs.delete(m.k)
      if (m.built !== undefined) p.resolve(m.built)
      else p.reject(new PdBridgeError(`block writer: block ${m.k} could not be built: ${m.error ?? 'no reason given'}`))
    })
    const stop = (e: Error): void => {
      b.stopped ??= e
      for (const p of b.jobs.values()) p.reject(e)
      b.jobs.clear()
    }
    worker.on('error', (e) => stop(new PdBridgeError(`block writer: a builder thread failed: ${e.message}`)))
    worker.on('exit', (code) => stop(new PdBridgeError(`block writer: a builder thread exited (code ${code})`)))
    return b
  }

  /** Build block `k` on the least busy thread. */
  async build (k: number, hash: string, parentHash: string | null): Promise<BuiltBlock> {
    if (this.closed) throw new PdBridgeError('block writer: the builder threads are closed')
    const live = this.builders.filter((b) => b.stopped === undefined)
    if (live.length === 0) throw this.builders[0].stopped as Error
    const b = live.reduce((best, x) => x.jobs.size < best.jobs.size ? x : best)
    return await new Promise<BuiltBlock>((resolve, reject) => {
      b.jobs.set(k, { resolve, reject })
      b.worker.postMessage({ k, hash, parentHash })
    })
  }

  /** Let every thread close its files and exit (pending builds are rejected). */
  async close (): Promise<void> {
    if (this.closed) return
    this.closed = true
    await Promise.all(this.builders.map(async (b) => {
      if (b.stopped !== undefined) return
      const exited = once(b.worker, 'exit')
      b.worker.postMessage('close')
      // A thread that does not exit on its own within a second is stopped.
      const timer = setTimeout(() => { void b.worker.terminate() }, 1000)
      await exited.catch(() => undefined)
      clearTimeout(timer)
    }))
  }
}

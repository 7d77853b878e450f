// Tokenizing prompts for routing, once per request. Small bodies are encoded on the event loop
// (cheaper than a message round trip); a body of at least `workerBytes` is encoded in a worker
// thread (tokenize-worker.ts), so /health and other requests are answered meanwhile. The ids are
// the ones routing, the store lookup and the bridge all use: nothing tokenizes a prompt twice.
import { EventEmitter } from 'node:events'
import { Worker } from 'node:worker_threads'
import type { Tokenizer } from '../model/tokenizer/index.ts'
import { promptTokenIds, type PromptSource } from './prompt.ts'

/** Counters for /health (`tokenize`). */
export interface TokenizeStats {
  /** Prompts tokenized (one per routed request). */
  runs: number
  /** Of those, in the worker thread. */
  worker: number
  /** Of those, on the event loop. */
  inline: number
  /** Worker jobs that failed (the request was declined, not refused). */
  failed: number
}

/** Where the tokenizer of one request runs, and with what. */
export interface TokenizeJob {
  prompt: PromptSource
  /** The request body's size in bytes: what picks the thread. */
  bodyBytes: number
  modelDir: string
  tokenizer: Tokenizer
  vocabSize: number
}

/**
 * Tokenizes prompts; emits `start` and `done` ({ where: 'worker' | 'inline' }) around each, so
 * tests can see the order of events.
 */
export class PromptTokenizer extends EventEmitter {
  readonly stats: TokenizeStats = { runs: 0, worker: 0, inline: 0, failed: 0 }
  private worker: Worker | undefined
  private nextId = 1
  private readonly pending = new Map<number, { resolve: (ids: number[] | null) => void, reject: (e: Error) => void }>()

  constructor (readonly workerBytes: number) {
    super()
  }

  /** The prompt's token ids as the decoder computes them (null: opaque, or ids outside the vocabulary). */
  async tokenize (job: TokenizeJob): Promise<number[] | null> {
    this.stats.runs++
    const where = job.bodyBytes >= this.workerBytes ? 'worker' : 'inline'
    this.emit('start', { where })
    try {
      if (where === 'inline') {
        this.stats.inline++
        return promptTokenIds(job.prompt, job.tokenizer, job.vocabSize)
      }
      this.stats.worker++
      try {
        return await this.inWorker(job)
      } catch (e) {
        this.stats.failed++
        throw e
      }
    } finally {
      this.emit('done', { where })
    }
  }

  private ensureWorker (): Worker {
    if (this.worker !== undefined) return this.worker
    const w = new Worker(new URL('./tokenize-worker.mjs', import.meta.url))
    // An idle worker does not keep the process alive; a pending job refs it again.
    w.unref()
    w.on('message', (m: { id: number, tokens?: Int32Array | null, error?: string }) => {
      const p = this.pending.get(m.id)
      if (p === undefined) return
      this.pending.delete(m.id)
      if (this.pending.size === 0) w.unref()
      if (m.error !== undefined) p.reject(new Error(`the tokenizer thread failed: ${m.error}`))
      else p.resolve(m.tokens == null ? null : Array.from(m.tokens))
    })
    const fail = (e: Error): void => {
      if (this.worker === w) this.worker = undefined
      for (const p of this.pending.values()) p.reject(new Error(`the tokenizer thread stopped: ${e.message}`))
      this.pending.clear()
    }
    w.on('error', fail)
    w.on('exit', (code) => fail(new Error(`exit code ${code}`)))
    this.worker = w
    return w
  }

  private async inWorker (job: TokenizeJob): Promise<number[] | null> {
    const w = this.ensureWorker()
    const id = this.nextId++
    return await new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject })
      w.ref()
      w.postMessage({ id, modelDir: job.modelDir, prompt: job.prompt, vocabSize: job.vocabSize })
    })
  }

  /** Stop the worker thread (pending jobs fail). */
  async close (): Promise<void> {
    const w = this.worker
    this.worker = undefined
    if (w !== undefined) await w.terminate()
  }
}

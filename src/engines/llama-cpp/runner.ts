// A small wrapper around node-llama-cpp (3.22.1, llama.cpp v0.5.0) for parity work: load a GGUF on
// the CPU with one fixed context configuration, tokenize, evaluate token ids and read raw logits,
// greedy decode. One sequence per context, no sampling of ours: logits come from llama.cpp as it
// computed them, greedy picks are the argmax taken here (lowest id on ties, as our engine does),
// and a sampled pick is llama.cpp's own sampler chain (`evaluate` with `sample`).
import { readFileSync } from 'node:fs'
import { PdBridgeError } from '../../errors.ts'

/** The node-llama-cpp version this wrapper and the GGUF exporter are pinned to. */
export const NODE_LLAMA_CPP_VERSION = '3.22.1'

/** How the context is configured. Every field is fixed for a run: they change llama.cpp's arithmetic. */
export interface LlamaCppContextOptions {
  /** Positions the context holds (prompt + generated tokens). */
  contextSize: number
  /** CPU threads (default 2). */
  threads?: number
  /** KV cache type of both K and V (default F32; llama.cpp's own default is F16). */
  kvCacheType?: 'F32' | 'F16'
  /** Flash attention (default off). */
  flashAttention?: boolean
  /** Tokens per batch (default: the context size, so a prompt is one batch). */
  batchSize?: number
}

/** Logits of chosen positions of one evaluation. */
export interface LlamaCppLogits {
  /** Row-major [positions.length, vocab]; empty when llama.cpp sampled instead (`sample`). */
  logits: Float32Array
  vocab: number
  positions: number[]
  /** With `sample`: the token llama.cpp's sampler chain chose after the last token. */
  token?: number
}

/**
 * llama.cpp's own sampler chain for the token after an evaluation (node-llama-cpp's
 * `generateNext.options`): penalties over `punishTokens`, then top_k, top_p, min_p, temperature and
 * its seeded `dist` draw (std::mt19937) in llama.cpp's order. node-llama-cpp builds a fresh sampler
 * for every evaluate call, so `seed` seeds that one draw.
 */
export interface LlamaCppSampleOptions {
  temperature: number
  /** 0: the whole vocabulary. */
  topK: number
  topP: number
  minP: number
  presencePenalty: number
  frequencyPenalty: number
  /** The tokens the penalties count (each as often as it occurs). */
  punishTokens: readonly number[]
  /** An unsigned 32-bit seed for this draw. */
  seed: number
}

type NodeLlamaCpp = typeof import('node-llama-cpp')
type Llama = Awaited<ReturnType<NodeLlamaCpp['getLlama']>>
type LlamaModel = Awaited<ReturnType<Llama['loadModel']>>
type LlamaContext = Awaited<ReturnType<LlamaModel['createContext']>>
type LlamaContextSequence = ReturnType<LlamaContext['getSequence']>

let llamaPromise: Promise<Llama> | undefined
/** llama.cpp's recent error lines (kept, not printed), for the message when a load fails. */
const recentErrors: string[] = []

/** The CPU build of llama.cpp that node-llama-cpp ships prebuilt (never built or downloaded here), loaded once. */
export async function loadLlamaCpu (): Promise<Llama> {
  llamaPromise ??= (async () => {
    const { getLlama, LlamaLogLevel } = await import('node-llama-cpp')
    return getLlama({
      gpu: false,
      build: 'never',
      progressLogs: false,
      logLevel: LlamaLogLevel.error,
      logger: (_level, message) => {
        recentErrors.push(message.trim())
        if (recentErrors.length > 8) recentErrors.shift()
      },
    })
  })()
  return llamaPromise
}

function argmax (row: Float32Array): number {
  let best = 0
  for (let i = 1; i < row.length; i++) if (row[i] > row[best]) best = i
  return best
}

/** A GGUF model loaded into llama.cpp on the CPU. */
export class LlamaCppModel {
  private constructor (readonly path: string, private readonly model: LlamaModel) {}

  /** Load `path` (mmap off, so the file may be replaced afterwards). */
  static async load (path: string): Promise<LlamaCppModel> {
    const llama = await loadLlamaCpu()
    recentErrors.length = 0
    try {
      return new LlamaCppModel(path, await llama.loadModel({ modelPath: path, gpuLayers: 0, useMmap: false }))
    }
    catch (err) {
      const cause = recentErrors.find((m) => m.includes('error loading model')) ?? recentErrors[0]
      throw new PdBridgeError(`${path}: llama.cpp could not load it: ${cause ?? (err as Error).message}`)
    }
  }

  /** Vocabulary size as llama.cpp sees it. */
  get vocab (): number {
    const tokens = (this.model.fileInfo.metadata as unknown as { tokenizer?: { ggml?: { tokens?: unknown[] } } }).tokenizer?.ggml?.tokens
    if (!Array.isArray(tokens)) throw new PdBridgeError(`${this.path}: no tokenizer.ggml.tokens`)
    return tokens.length
  }

  /** llama.cpp's token ids for `text`, special tokens matched in the text (as Hugging Face does), no bos added. */
  tokenize (text: string): number[] {
    return this.model.tokenize(text, true).map(Number)
  }

  /** llama.cpp's text for `ids`; special tokens rendered as their text unless `skipSpecialTokens`. */
  detokenize (ids: readonly number[], skipSpecialTokens = false): string {
    return this.model.detokenize(ids as never, !skipSpecialTokens)
  }

  /** A context of one sequence with `opts`. */
  async session (opts: LlamaCppContextOptions): Promise<LlamaCppSession> {
    const context = await this.model.createContext({
      contextSize: opts.contextSize,
      batchSize: opts.batchSize ?? opts.contextSize,
      sequences: 1,
      threads: { ideal: opts.threads ?? 2, min: opts.threads ?? 2 },
      flashAttention: opts.flashAttention ?? false,
      experimentalKvCacheKeyType: opts.kvCacheType ?? 'F32',
      experimentalKvCacheValueType: opts.kvCacheType ?? 'F32',
    })
    return new LlamaCppSession(context, context.getSequence(), this.vocab)
  }

  async dispose (): Promise<void> {
    await this.model.dispose()
  }
}

/** One sequence of a context: evaluate ids, read logits, greedy decode. */
export class LlamaCppSession {
  constructor (private readonly context: LlamaContext, private readonly sequence: LlamaContextSequence, readonly vocab: number) {}

  /** Tokens the sequence holds. */
  get tokenCount (): number {
    return this.sequence.nextTokenIndex
  }

  /**
   * Evaluate `tokens` after what the sequence holds and return the raw logits of the last `tail`
   * of them (default 1), in position order; with `sample`, no logits but the token llama.cpp's
   * sampler chain picks after the last one.
   */
  async evaluate (tokens: readonly number[], tail = 1, sample?: LlamaCppSampleOptions): Promise<LlamaCppLogits> {
    if (tokens.length === 0) throw new PdBridgeError('llama.cpp evaluate: no tokens')
    if (sample !== undefined) return await this.evaluateAndSample(tokens, sample)
    const n = Math.min(Math.max(1, tail), tokens.length)
    const first = tokens.length - n
    const input = tokens.map((t, i) => i >= first ? [t, { generateNext: { logits: true } }] as [number, { generateNext: { logits: true } }] : t)
    const out = await this.sequence.controlledEvaluate(input as never)
    const logits = new Float32Array(n * this.vocab)
    const positions: number[] = []
    for (let i = first; i < tokens.length; i++) {
      const map = out[i]?.next.logits
      if (map === undefined || map.size !== this.vocab) throw new PdBridgeError(`llama.cpp evaluate: no full logits row for token ${i} (got ${map?.size ?? 0} of ${this.vocab})`)
      const row = logits.subarray((i - first) * this.vocab, (i - first + 1) * this.vocab)
      for (const [token, value] of map) row[Number(token)] = value
      positions.push(this.tokenCount - tokens.length + i)
    }
    return { logits, vocab: this.vocab, positions }
  }

  private async evaluateAndSample (tokens: readonly number[], o: LlamaCppSampleOptions): Promise<LlamaCppLogits> {
    const options = {
      temperature: o.temperature,
      topK: o.topK,
      topP: o.topP,
      minP: o.minP,
      seed: o.seed,
      // penalty 1 turns llama.cpp's multiplicative repeat penalty off; the window covers every punished token.
      repeatPenalty: { punishTokens: [...o.punishTokens], penalty: 1, presencePenalty: o.presencePenalty, frequencyPenalty: o.frequencyPenalty, maxPunishTokens: Math.max(1, o.punishTokens.length) },
    }
    const input = tokens.map((t, i) => i === tokens.length - 1 ? [t, { generateNext: { token: true, options } }] : t)
    const out = await this.sequence.controlledEvaluate(input as never)
    const token = out[tokens.length - 1]?.next.token
    if (token === undefined || token === null) throw new PdBridgeError('llama.cpp evaluate: its sampler chose no token')
    return { logits: new Float32Array(0), vocab: this.vocab, positions: [this.tokenCount - 1], token: Number(token) }
  }

  /**
   * Greedy continuation: the argmax (lowest id on ties) of `lastLogits`, then k-1 more, each fed
   * back and the argmax of its logits taken. The sequence ends holding the prompt and k-1 picks.
   */
  async greedy (lastLogits: Float32Array, k: number): Promise<number[]> {
    const picks: number[] = []
    let row = lastLogits
    for (let i = 0; i < k; i++) {
      picks.push(argmax(row))
      if (i + 1 < k) row = (await this.evaluate([picks[i]], 1)).logits
    }
    return picks
  }

  /** Remove every token (and its cache cells) from the sequence: it holds 0 tokens afterwards. */
  async clear (): Promise<void> {
    await this.sequence.clearHistory()
    if (this.tokenCount !== 0) throw new PdBridgeError(`llama.cpp session: ${this.tokenCount} tokens left after clearing the sequence`)
  }

  /** Write this sequence's state as llama.cpp saves it (its own bytes, tokens included) to `path`. */
  async saveState (path: string): Promise<void> {
    await this.sequence.saveStateToFile(path)
  }

  /**
   * Replace this sequence's state with the file at `path`. `check` sees the bytes first and throws
   * on a state that does not fit (state/guard.ts): llama.cpp trusts the file and a foreign one can
   * crash the process. What llama.cpp still refuses surfaces with its own error lines.
   */
  async loadState (path: string, check: (bytes: Uint8Array) => void): Promise<void> {
    check(new Uint8Array(readFileSync(path)))
    recentErrors.length = 0
    try {
      await this.sequence.loadStateFromFile(path, { acceptRisk: true })
    }
    catch (err) {
      // llama.cpp's log lines come through another native callback than the rejection, and on a
      // loaded machine they can arrive after it: give them a few turns before falling back to
      // node-llama-cpp's generic message.
      for (let i = 0; i < 50 && recentErrors.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10))
      const cause = recentErrors.length > 0 ? recentErrors.join('; ') : (err as Error).message
      throw new PdBridgeError(`${path}: llama.cpp refused the sequence state: ${cause}`)
    }
  }

  async dispose (): Promise<void> {
    await this.context.dispose()
  }
}

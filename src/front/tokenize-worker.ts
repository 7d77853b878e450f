// The front door's tokenizer thread: loads the decoder's tokenizer (once per checkpoint directory)
// and encodes prompts exactly as promptTokenIds does on the main thread, so a large body never
// holds the event loop. Messages: { id, modelDir, prompt, vocabSize } in, { id, tokens | error } out.
import { parentPort } from 'node:worker_threads'
import { loadTokenizer, type Tokenizer } from '../model/tokenizer/index.ts'
import { promptTokenIds, type PromptSource } from './prompt.ts'

interface Job { id: number, modelDir: string, prompt: PromptSource, vocabSize: number }

const tokenizers = new Map<string, Promise<Tokenizer>>()

parentPort?.on('message', (job: Job) => {
  void (async () => {
    try {
      let t = tokenizers.get(job.modelDir)
      if (t === undefined) {
        t = loadTokenizer(job.modelDir)
        tokenizers.set(job.modelDir, t)
        t.catch(() => tokenizers.delete(job.modelDir))
      }
      const ids = promptTokenIds(job.prompt, await t, job.vocabSize)
      if (ids === null) return parentPort?.postMessage({ id: job.id, tokens: null })
      const out = Int32Array.from(ids)
      parentPort?.postMessage({ id: job.id, tokens: out }, [out.buffer])
    } catch (e) {
      parentPort?.postMessage({ id: job.id, error: (e as Error).message ?? String(e) })
    }
  })()
})

// Fuzzing what the last fuzz suites left out: HTTP bodies (the prefill engine's POST /v1/prefill
// parser with a real tokenizer, the decoder's chat and completion parsers the front door applies
// first), the sharded checkpoint's index, and capture layer files (the payload the share serves
// and the writer decodes). Every input parses or is refused with the project's own error class,
// never another exception. Fixed seeds (helpers.ts).
import fc from 'fast-check'
import { afterAll, beforeAll, describe, it } from 'vitest'
import { CaptureSession, exportWeights, type Sidecar } from '../../src/capture/index.ts'
import { decodeLayerFile } from '../../src/wire/layer-file.ts'
import { readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { parseChatRequest, parseCompletionRequest } from '../../src/engines/decoder/request.ts'
import { parsePrefillRequest } from '../../src/engines/prefill/request.ts'
import { encodeShardIndex, parseShardIndex } from '../../src/formats/safetensors/index.ts'
import { DeepseekV4Engine } from '../../src/model/engine/index.ts'
import { loadTokenizer, type Tokenizer } from '../../src/model/tokenizer/index.ts'
import { OpenAiApiError } from '../../src/http/openai-error.ts'
import { fixtureTokens, nativeRun, replay, tinySetup, type TinySetup } from '../capture/helpers.ts'
import { SEED, Tally, applyByteEdits, byteEditArb, judge, judgeAsync, mutateText, runs } from './helpers.ts'

const tallies: Tally[] = []
afterAll(() => { for (const t of tallies) console.log(t.line()) })

let setup: TinySetup
let tokenizer: Tokenizer
let layerFile: Uint8Array
beforeAll(async () => {
  setup = await tinySetup('fuzz-bodies')
  tokenizer = await loadTokenizer(setup.ckptDir)
  // A real layer file: the TypeScript hook's capture of 300 tokens, blocks of 128 (snapshots in it).
  const sidecar: Sidecar = await exportWeights({ model: setup.ckptDir, profile: 'decoder', out: join(setup.root, 'sidecar'), blockSize: 128 })
  const engine = DeepseekV4Engine.fromCheckpoint(setup.ckpt, 'decoder')
  const tokens = fixtureTokens(300)
  const { inputs } = nativeRun(engine, tokens)
  const session = await CaptureSession.start({ sidecar, captureRoot: setup.root, requestId: 'fuzz', tokenCount: tokens.length, tokens })
  replay(inputs, engine.config.hiddenSize, 300, session.onAttentionInput)
  await session.finish()
  const file = readdirSync(session.dir).filter((f) => f.startsWith('layer-')).sort()[1]
  layerFile = new Uint8Array(readFileSync(join(session.dir, file)))
})
afterAll(() => setup?.dispose())

/** JSON-ish bodies: anything JSON can be, and edits of a valid body's fields. */
function bodyArb (valid: Record<string, unknown>): fc.Arbitrary<unknown> {
  const field = fc.constantFrom(...Object.keys(valid), 'request_id', 'tokens_sha256', 'stream', 'max_tokens', 'temperature', '__proto__', 'constructor')
  const value = fc.oneof(fc.jsonValue({ maxDepth: 3 }), fc.constantFrom(-1, 0, 1, 2 ** 53, 1e308, -0, '', 'x'.repeat(300), [], {}, null, true))
  return fc.oneof(
    fc.jsonValue({ maxDepth: 4 }),
    fc.array(fc.tuple(fc.constantFrom('set', 'delete'), field, value), { minLength: 1, maxLength: 4 }).map((edits) => {
      const body: Record<string, unknown> = JSON.parse(JSON.stringify(valid))
      for (const [op, k, v] of edits) {
        if (op === 'delete') delete body[k]
        else Object.defineProperty(body, k, { value: v, enumerable: true, writable: true, configurable: true })
      }
      return body
    }),
  )
}

const RUNS = 4000

describe('HTTP bodies', () => {
  it('POST /v1/prefill bodies: parsed or an ApiError (tokens, prompt and messages forms, a real tokenizer)', () => {
    const tally = new Tally('prefill request bodies')
    tallies.push(tally)
    const limits = { vocabSize: 512, maxTokens: 4096, maxPositionEmbeddings: 32768, tokenizer }
    for (const valid of [{ tokens: [3, 4, 5] }, { prompt: 'hello there' }, { messages: [{ role: 'user', content: 'hi' }], memory_budget_bytes: 1000 }]) {
      fc.assert(fc.property(bodyArb(valid), (body) => { judge(tally, body, () => parsePrefillRequest(body, limits)) }), { seed: SEED, numRuns: runs(RUNS) })
    }
  })

  it('chat and completion bodies (the decoder\'s parsers, applied by the front door first): parsed or an OpenAI-style error', () => {
    const tally = new Tally('chat/completion request bodies')
    tallies.push(tally)
    const chat = { model: 'm', messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }], max_tokens: 8, temperature: 0, stream: true, stream_options: { include_usage: true } }
    const completion = { model: 'm', prompt: [[1, 2, 3]], max_tokens: 4, stop: ['x'] }
    fc.assert(fc.property(bodyArb(chat), (body) => { judge(tally, body, () => parseChatRequest(body), OpenAiApiError) }), { seed: SEED, numRuns: runs(RUNS) })
    fc.assert(fc.property(bodyArb(completion), (body) => { judge(tally, body, () => parseCompletionRequest(body), OpenAiApiError) }), { seed: SEED, numRuns: runs(RUNS) })
  })
})

describe('the shard index (model.safetensors.index.json)', () => {
  it('edited index text: parsed or a SafetensorsError', () => {
    const tally = new Tally('shard index text')
    tallies.push(tally)
    const valid = encodeShardIndex(1234, new Map([['model.embed_tokens.weight', 'model-00001-of-00002.safetensors'], ['lm_head.weight', 'model-00002-of-00002.safetensors']]), 617)
    fc.assert(fc.property(fc.array(byteEditArb, { minLength: 1, maxLength: 4 }), (edits) => {
      const text = mutateText(valid, edits)
      judge(tally, text, () => parseShardIndex(text, 'fuzz/model.safetensors.index.json'))
    }), { seed: SEED, numRuns: runs(RUNS) })
    fc.assert(fc.property(fc.jsonValue({ maxDepth: 4 }), (v) => {
      const text = JSON.stringify(v) ?? 'null'
      judge(tally, text, () => parseShardIndex(text, 'fuzz/model.safetensors.index.json'))
    }), { seed: SEED, numRuns: runs(1000) })
  })
})

describe('capture layer files', () => {
  it('edited bytes of a real layer file: decoded or a PdBridgeError', async () => {
    const tally = new Tally('capture layer file bytes')
    tallies.push(tally)
    // Edits land in one 600-byte window: the length prefix and JSON header (where parsing decides
    // most), the first tensor bytes, or the end; the rest of the file is kept as it was.
    const windows = [0, 600, layerFile.length - 600]
    await fc.assert(fc.asyncProperty(fc.array(byteEditArb, { minLength: 1, maxLength: 4 }), fc.constantFrom(...windows), async (edits, at) => {
      const edited = applyByteEdits(layerFile.subarray(at, at + 600), edits)
      const input = new Uint8Array(at + edited.length + layerFile.length - (at + 600))
      input.set(layerFile.subarray(0, at))
      input.set(edited, at)
      input.set(layerFile.subarray(at + 600), at + edited.length)
      await judgeAsync(tally, input, async () => decodeLayerFile(input, 'fuzz/layer-001.safetensors'))
    }), { seed: SEED, numRuns: runs(2000) })
  })
})

// `pd-bridge decoder --engine llama.cpp`: node-llama-cpp behind the decoder's HTTP layer, launched in
// process on 127.0.0.1 and driven by the official openai client, with its store of sequence states
// (blocks of 64 tokens). Against a plain llama.cpp session of the same GGUF (evaluate + greedy, no
// store): a cold prompt writes one state per boundary and answers cached 0; the same prompt again
// restores the longest boundary below its end and answers the same ids; a longer prompt hits the
// shared prefix; streaming; a chat with tools rendered as the front door and llama.cpp's own template
// engine render it; foreign, truncated and copied-in state files; a mismatched GGUF, and
// bad flags, refused at launch by the real CLI.
import { spawn } from 'node:child_process'
import { copyFileSync, readdirSync, readFileSync, truncateSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import OpenAI from 'openai'
import pino from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { launchLlamaCppDecoder, llamaCppGeometryFingerprint, type LaunchedLlamaCppDecoder } from '../../src/engines/llama-cpp/decoder/index.ts'
import { LlamaCppModel, NODE_LLAMA_CPP_VERSION } from '../../src/engines/llama-cpp/runner.ts'
import { stateGeometry } from '../../src/engines/llama-cpp/state/index.ts'
import { LlamaCppStateStore, STATE_SUFFIX } from '../../src/engines/llama-cpp/store/index.ts'
import { loadDeepseekV4Config, type DeepseekV4Config } from '../../src/model/config.ts'
import { ChatFormat, renderChat, type ChatMessage, type ChatRenderOptions, type ChatTurn } from '../../src/model/tokenizer/index.ts'
import { LlamaCppChatTemplate } from '../../src/engines/llama-cpp/chat-template.ts'
import { promptTokenIds, readFrontRequest } from '../../src/front/prompt.ts'
import { readGgufHeader } from '../../src/formats/gguf/index.ts'
import { exportGguf } from '../../src/model/gguf/index.ts'
import { cutAtEos, makeTiny, tempDir, tinyTokenizer } from '../decoder-server/helpers.ts'

const BLOCK = 64
const MAX = 8
const EOS = 1
const MODEL_NAME = 'tiny-llama'
const tmp = tempDir('llama-decoder')
const cacheDir = join(tmp.dir, 'cache')
const logFile = join(tmp.dir, 'decoder.log')
const tokenizer = tinyTokenizer()
let modelDir: string
let gguf: string
let cfg: DeepseekV4Config
let decoder: LaunchedLlamaCppDecoder
let client: OpenAI
let plain: LlamaCppModel
/** A second view of the store directory, for keys and paths only (the server's own store is inside it). */
let keys: LlamaCppStateStore

/** Deterministic token-id prompts (ids 5..504, no special token), so prefixes share exactly. */
const ids = (n: number, seed: number): number[] => Array.from({ length: n }, (_, i) => 5 + ((i * 37 + seed * 101 + ((i * i) % 13)) % 500))
const A = ids(150, 1) // boundaries 64, 128
const B = [...A, ...ids(50, 2)] // A's 150 and 50 more: boundaries up to 192
const C = ids(140, 3)
const E = ids(70, 4)

/** What a plain llama.cpp session (one batch, no store) answers: greedy ids, cut after eos. */
async function plainGreedy (prompt: number[], k = MAX, kvCacheType: 'F32' | 'F16' = 'F32'): Promise<number[]> {
  const s = await plain.session({ contextSize: prompt.length + k + 4, kvCacheType })
  try {
    const { logits } = await s.evaluate(prompt, 1)
    return cutAtEos(await s.greedy(logits, k), EOS)
  } finally {
    await s.dispose()
  }
}

/** A state file as llama.cpp saves it after `prompt` in a fresh plain session. */
async function plainState (prompt: number[], kvCacheType: 'F32' | 'F16', out: string): Promise<void> {
  const s = await plain.session({ contextSize: 1024, kvCacheType })
  try {
    await s.evaluate(prompt, 1)
    await s.saveState(out)
  } finally {
    await s.dispose()
  }
}

interface Completion { ids: number[], cached: number, header: string | null, text: string }

async function complete (prompt: number[]): Promise<Completion> {
  const { data, response } = await client.completions.create({
    model: MODEL_NAME, prompt, max_tokens: MAX, return_token_ids: true,
  } as OpenAI.CompletionCreateParamsNonStreaming).withResponse()
  return {
    ids: (data.choices[0] as unknown as { token_ids: number[] }).token_ids,
    cached: data.usage?.prompt_tokens_details?.cached_tokens ?? -1,
    header: response.headers.get('x-cached-tokens'),
    text: data.choices[0].text,
  }
}

const stateFiles = (): string[] => readdirSync(cacheDir).filter((n) => n.endsWith(STATE_SUFFIX)).sort()
const pathAt = (prompt: number[], n: number): string => keys.pathOf(keys.keysOf(prompt.slice(0, n)).at(-1)!)
const logLines = (): Array<Record<string, unknown>> => readFileSync(logFile, 'utf8').split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>)
const health = async (): Promise<Record<string, any>> => await (await fetch(`${decoder.server.url}/health`)).json() as Record<string, any>
const rescan = async (): Promise<Record<string, any>> => await (await fetch(`${decoder.server.url}/v1/cache/rescan`, { method: 'POST' })).json() as Record<string, any>

beforeAll(async () => {
  modelDir = await makeTiny(join(tmp.dir, 'model'))
  gguf = join(tmp.dir, 'tiny.gguf')
  await exportGguf({ model: modelDir, out: gguf, type: 'f32' })
  cfg = await loadDeepseekV4Config(modelDir)
  const logger = pino({ level: 'info' }, pino.destination({ dest: logFile, sync: true }))
  decoder = await launchLlamaCppDecoder({ modelDir, gguf, cacheDir, blockSize: BLOCK, modelName: MODEL_NAME, port: 0, maxTokens: 64, logger })
  client = new OpenAI({ baseURL: `${decoder.server.url}/v1`, apiKey: 'unused', maxRetries: 0 })
  plain = await LlamaCppModel.load(gguf)
  keys = LlamaCppStateStore.open({ dir: cacheDir, modelName: MODEL_NAME, blockSize: BLOCK, geometry: stateGeometry(cfg) })
})

afterAll(async () => {
  // Every request's numbers, for docs/llama-cpp.md (they vary with the machine's load).
  if (decoder !== undefined) {
    for (const g of logLines().filter((l) => l.event === 'generation')) {
      console.log(`prompt ${String(g.prompt_tokens).padStart(4)}  cached ${String(g.cached_tokens).padStart(4)}  stored ${String(g.stored_blocks)}  prefill ${String(g.prefill_ms).padStart(5)} ms  decode ${String(g.decode_ms).padStart(4)} ms for ${String(g.completion_tokens)}`)
    }
  }
  await decoder?.close()
  await plain?.dispose()
  tmp.remove()
})

describe('the llama.cpp decoder', () => {
  let cold: Completion
  it('a cold prompt of two blocks and a bit: cached 0, one state file per boundary, the ids of a plain llama.cpp run', async () => {
    cold = await complete(A)
    expect(cold.cached).toBe(0)
    expect(cold.header).toBe('0')
    expect(stateFiles()).toEqual([64, 128].map((n) => pathAt(A, n).split('/').at(-1)).sort())
    const want = await plainGreedy(A)
    expect(cold.ids).toEqual(want)
    expect(cold.text).toBe(tokenizer.decode(want, { skipSpecialTokens: true }))
    const gen = logLines().filter((l) => l.event === 'generation').at(-1)!
    expect(gen).toMatchObject({ prompt_tokens: 150, cached_tokens: 0, stored_blocks: 2, reused_blocks: 0, failed_blocks: 0 })
    console.log(`cold A (150 tokens): prefill ${String(gen.prefill_ms)} ms, decode ${String(gen.decode_ms)} ms for ${cold.ids.length} tokens; files ${stateFiles().length}`)
  })

  it('the same prompt again restores 128 tokens (the longest boundary below its end) and answers the same ids', async () => {
    const warm = await complete(A)
    expect(warm.cached).toBe(128)
    expect(warm.header).toBe('128')
    expect(warm.ids).toEqual(cold.ids)
    expect(warm.text).toBe(cold.text)
    const gen = logLines().filter((l) => l.event === 'generation').at(-1)!
    expect(gen).toMatchObject({ cached_tokens: 128, stored_blocks: 0, reused_blocks: 0 })
    console.log(`warm A: prefill ${String(gen.prefill_ms)} ms (restore + 22 tokens)`)
  })

  it('a longer prompt sharing the prefix hits at 128, writes its 192 boundary, and answers a plain run\'s ids', async () => {
    const r = await complete(B)
    expect(r.cached).toBe(128)
    expect(r.ids).toEqual(await plainGreedy(B))
    expect(stateFiles()).toHaveLength(3)
    expect(keys.rescan().files).toBe(3)
    expect(keys.has(B.slice(0, 192))).toBe(true)
  })

  it('streams a chat: the same text as whole, usage with cached_tokens', async () => {
    const messages: ChatMessage[] = [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Tell me about the sea, the waves and the wind. '.repeat(5) }]
    const prompt = tokenizer.encode(renderChat(messages, true))
    expect(prompt.length).toBeGreaterThan(BLOCK)
    const whole = await client.chat.completions.create({ model: MODEL_NAME, messages, max_tokens: MAX })
    const stream = await client.chat.completions.create({ model: MODEL_NAME, messages, max_tokens: MAX, stream: true, stream_options: { include_usage: true } })
    let text = ''
    let usage: OpenAI.CompletionUsage | undefined
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? ''
      if (chunk.usage) usage = chunk.usage
    }
    const want = await plainGreedy(prompt)
    expect(whole.choices[0].message.content).toBe(tokenizer.decode(want, { skipSpecialTokens: true }))
    expect(text).toBe(whole.choices[0].message.content)
    expect(whole.usage?.prompt_tokens_details?.cached_tokens).toBe(0)
    expect(usage?.prompt_tokens_details?.cached_tokens).toBe(Math.floor((prompt.length - 1) / BLOCK) * BLOCK)
  })

  it('a chat with tools, a tool call and its result: the prompt ids the front door computes, the text llama.cpp\'s own engine renders from the GGUF', async () => {
    const body = {
      model: MODEL_NAME, max_tokens: MAX, return_token_ids: true,
      tools: [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } } }],
      messages: [
        { role: 'developer', content: 'Use tools.' },
        { role: 'user', content: 'Find the sea. '.repeat(6) },
        { role: 'assistant', content: '', reasoning_content: 'look it up', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'lookup', arguments: '{"q": "sea"}' } }] },
        { role: 'tool', tool_call_id: 'c1', content: 'the sea is wide' },
        { role: 'user', content: 'So?' },
      ],
    }
    const front = readFrontRequest(body, 'chat')
    const frontIds = promptTokenIds(front.prompt, tokenizer, cfg.vocabSize)
    const data = await client.chat.completions.create(body as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming) as unknown as { prompt_token_ids: number[], choices: Array<{ token_ids: number[] }> }
    expect(frontIds).not.toBeNull()
    expect(data.prompt_token_ids).toEqual(frontIds)
    const template = (await readGgufHeader(gguf)).metadata.get('tokenizer.chat_template') as { value: string }
    const ours = ChatFormat.fromConfig(JSON.parse(readFileSync(join(modelDir, 'tokenizer_config.json'), 'utf8'))) as ChatFormat
    const llama = await LlamaCppChatTemplate.compile(template.value, ours.specials)
    const chat = front.prompt as { messages: ChatTurn[], chat: ChatRenderOptions }
    expect(tokenizer.encode(llama.render(chat.messages, chat.chat))).toEqual(data.prompt_token_ids)
    expect(data.choices[0].token_ids).toEqual(await plainGreedy(data.prompt_token_ids))
  })

  it('an F16 state under a prompt\'s key is refused with a logged reason; the prompt is served as a miss, correctly', async () => {
    const foreign = pathAt(C, 64)
    await plainState(C.slice(0, 64), 'F16', foreign)
    expect((await rescan()).report.files).toBe(stateFiles().length)
    const r = await complete(C)
    expect(r.cached).toBe(0)
    expect(r.ids).toEqual(await plainGreedy(C))
    const refused = logLines().filter((l) => l.event === 'cache.refused' && l.file === foreign)
    expect(refused).toHaveLength(1)
    // The guard names the K type: ggml type 1 is F16.
    expect(String(refused[0].reason)).toMatch(/ggml type 1, the context's K cache is F32/)
    console.log(`refused: ${String(refused[0].reason)}`)
    // The miss wrote llama.cpp's own F32 state over it.
    expect(keys.check(new Uint8Array(readFileSync(foreign)), C.slice(0, 64)).tokens).toHaveLength(64)
    expect((await health()).cache.stats.refused).toBe(1)
  })

  it('a truncated state is refused and the next shorter boundary is restored; garbage is refused too', async () => {
    const at128 = pathAt(C, 128)
    truncateSync(at128, 1000)
    let r = await complete(C)
    expect(r.cached).toBe(64)
    expect(r.ids).toEqual(await plainGreedy(C))
    const truncated = logLines().filter((l) => l.event === 'cache.refused' && l.file === at128)
    expect(truncated).toHaveLength(1)
    console.log(`refused: ${String(truncated[0].reason)}`)
    // A file of random bytes at both boundaries: a full miss, answered right, both rewritten.
    for (const n of [64, 128]) writeFileSync(pathAt(C, n), Buffer.alloc(4096, 0x5a))
    await rescan()
    r = await complete(C)
    expect(r.cached).toBe(0)
    expect(r.ids).toEqual(await plainGreedy(C))
    expect(logLines().filter((l) => l.event === 'cache.refused')).toHaveLength(4)
    r = await complete(C)
    expect(r.cached).toBe(128)
  })

  it('rescan picks up a state file copied in from outside (a plain llama.cpp session\'s save)', async () => {
    const outside = join(tmp.dir, 'outside.llstate')
    await plainState(E.slice(0, 64), 'F32', outside)
    const before = stateFiles().length
    copyFileSync(outside, pathAt(E, 64))
    const report = await rescan()
    expect(report.report.files).toBe(before + 1)
    const r = await complete(E)
    expect(r.cached).toBe(64)
    expect(r.ids).toEqual(await plainGreedy(E))
  })

  it('/health names the engine, its context and store, and the geometry fingerprint', async () => {
    const h = await health()
    // No key configured: nobody holds it, so the GGUF and the store are shown by their names, not their paths.
    expect(h).toMatchObject({
      status: 'ok', engine: 'llama.cpp', node_llama_cpp: NODE_LLAMA_CPP_VERSION, gguf: '<gguf>', kv_cache_type: 'F32',
      context_size: cfg.maxPositionEmbeddings, flash_attention: false, block_size: BLOCK, model: MODEL_NAME,
      cache: { dir: '<cacheDir>', block_size: BLOCK, files: stateFiles().length },
      store: { dir: '<cacheDir>', writable: true, write_failures: 0 },
    })
    expect(JSON.stringify(h)).not.toContain(gguf)
    expect(h.geometry_fingerprint).toBe(llamaCppGeometryFingerprint(stateGeometry(cfg), BLOCK, MODEL_NAME))
    expect(h.geometry_fingerprint).not.toBe(llamaCppGeometryFingerprint(stateGeometry(cfg, { kvCacheType: 'F16' }), BLOCK, MODEL_NAME))
    expect(h.cache.stats).toMatchObject({ refused: 4 })
  })

  it('an unrelated short prompt after all this answers as a fresh sequence (nothing leaks)', async () => {
    const short = ids(30, 9)
    const r = await complete(short)
    expect(r.cached).toBe(0)
    expect(r.ids).toEqual(await plainGreedy(short))
  })
})

const bin = new URL('../../bin/pd-bridge.mjs', import.meta.url).pathname

function cli (args: string[]): Promise<{ code: number | null, stdout: string, stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [bin, 'decoder', '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (c: Buffer) => { stdout += c.toString() })
    child.stderr.on('data', (c: Buffer) => { stderr += c.toString() })
    child.on('exit', (code) => resolve({ code, stdout, stderr }))
  })
}

describe('pd-bridge decoder --engine llama.cpp refuses at launch', () => {
  it('a GGUF whose vocabulary disagrees with the config, with both numbers, exit 2', async () => {
    const other = join(tmp.dir, 'model-1024')
    const config = JSON.parse(readFileSync(join(modelDir, 'config.json'), 'utf8')) as Record<string, unknown>
    const { mkdirSync } = await import('node:fs')
    mkdirSync(other)
    writeFileSync(join(other, 'config.json'), JSON.stringify({ ...config, vocab_size: 1024 }))
    copyFileSync(join(modelDir, 'tokenizer.json'), join(other, 'tokenizer.json'))
    const r = await cli(['--engine', 'llama.cpp', '--model', other, '--gguf', gguf])
    expect(r.code).toBe(2)
    expect(r.stderr).toBe(`pd-bridge: ${gguf} does not match ${other}/config.json: vocabulary 512 (config: 1024); export it from this checkpoint (pd-bridge export-gguf --model ${other})\n`)
    expect(r.stdout).toBe('')
  })

  it('bad values and flags of the other engine, each in one line, exit 2', async () => {
    const cases: Array<[string[], string]> = [
      [['--engine', 'vllm', '--model', modelDir], '--engine: "vllm" is not one of ours, llama.cpp'],
      [['--engine', 'llama.cpp', '--model', modelDir], '--gguf is required with --engine llama.cpp'],
      [['--engine', 'llama.cpp', '--model', modelDir, '--gguf', gguf, '--kv-cache-type', 'Q8_0'], '--kv-cache-type: "Q8_0" is not F32 or F16'],
      [['--engine', 'llama.cpp', '--model', modelDir, '--gguf', gguf, '--context-size', '40000'], '--context-size must be an integer in [2, 32768], got 40000'],
      [['--model', modelDir, '--cache-dir', cacheDir, '--gguf', gguf], '--gguf: only with --engine llama.cpp'],
    ]
    for (const [args, message] of cases) {
      const r = await cli(args)
      expect(r.code, args.join(' ')).toBe(2)
      expect(r.stderr, args.join(' ')).toContain(message)
    }
  })
})

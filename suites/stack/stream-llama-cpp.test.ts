// Blocks while the engine runs into a llama.cpp decoder, through the embedded stack (prefill engine,
// share, llama.cpp decoder with its state store, front door with capture.streamBlocks, as child
// processes on 127.0.0.1), driven by the official openai client: a cold ~1,300-token greedy prompt is
// bridged complete through the streamed stage (the record says how many blocks were staged before
// the seal), llama.cpp restores the bridged tokens (cached), and the answer is the one a second
// llama.cpp decoder with an empty store gives. The engine killed after its first segment: declined
// with its reason, nothing kept in llama.cpp's store (states are built only at the seal), no staging
// directory left in the front door's temp directory (TMPDIR of the children is the test's own). The
// state's byte identity with the write-after path is suites/llama-cpp/stream-target.test.ts.
import { mkdirSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import OpenAI from 'openai'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { HANG_LIMIT_MS } from '../support/hang-limit.ts'
import { loadTokenizer, type Tokenizer } from '../../src/model/tokenizer/index.ts'
import { buildDemoPrompt } from '../../src/stack/demo/prompt.ts'
import { startEmbeddedStack, startNativeLeg, type EmbeddedStack, type NativeLeg } from '../../src/stack/embedded.ts'
import { waitFor } from '../front/stack.ts'
import { tempDir } from './helpers.ts'

const tmp = tempDir('stack-stream-llama')
const childTmp = join(tmp.dir, 'tmp')
const savedTmpdir = process.env.TMPDIR
let stack: EmbeddedStack
let native: NativeLeg
let tokenizer: Tokenizer

beforeAll(async () => {
  // The children's temp directory is this test's: the front door's staging stores land there.
  mkdirSync(childTmp, { recursive: true })
  process.env.TMPDIR = childTmp
  stack = await startEmbeddedStack({ stateDir: join(tmp.dir, 'state'), home: join(tmp.dir, 'home'), decoderEngine: 'llama.cpp', streamBlocks: true, port: 0 })
  native = await startNativeLeg(stack, 'stream')
  tokenizer = await loadTokenizer(stack.checkpoint.dir)
})

afterAll(async () => {
  if (savedTmpdir === undefined) delete process.env.TMPDIR
  else process.env.TMPDIR = savedTmpdir
  await stack?.stop()
  tmp.remove()
})

type Answer = { choices: Array<{ token_ids: number[] }>, usage: OpenAI.CompletionUsage, pd_bridge?: Record<string, any> }

async function ask (url: string, messages: unknown): Promise<{ data: Answer, verdict: string | null }> {
  const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: HANG_LIMIT_MS })
  const body = { model: stack.modelName, max_tokens: 8, temperature: 0, return_token_ids: true, messages }
  const { data, response } = await client.chat.completions.create(body as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming).withResponse()
  return { data: data as unknown as Answer, verdict: response.headers.get('x-pd-bridge') }
}

it('a cold prompt bridged into llama.cpp while the engine runs: complete, the bridged tokens cached, the empty-store decoder\'s answer', async () => {
  const prompt = buildDemoPrompt(tokenizer, 1300, 4401)
  const bridged = await ask(stack.urls.front, prompt.messages)
  const alone = await ask(native.url, prompt.messages)
  expect(bridged.verdict).toBe('complete')
  const pd = bridged.data.pd_bridge as Record<string, any>
  const blocks = pd.blocks.bridged as number
  expect(blocks).toBeGreaterThan(0)
  expect(pd.bridged_tokens).toBe(blocks * stack.blockSize)
  // The streamed stage ran (its record and timings), with no more blocks staged before the seal than there are.
  expect(pd.stream.blocks_before_seal).toBeGreaterThanOrEqual(0)
  expect(pd.stream.blocks_before_seal).toBeLessThanOrEqual(blocks)
  expect(pd.timings_ms.after_seal).toBeLessThanOrEqual(pd.timings_ms.capture)
  expect(bridged.data.usage.prompt_tokens_details?.cached_tokens).toBe(pd.bridged_tokens)
  expect(alone.data.usage.prompt_tokens_details?.cached_tokens).toBe(0)
  expect(bridged.data.choices[0].token_ids).toEqual(alone.data.choices[0].token_ids)
  console.log(`llama.cpp streamed: ${String(pd.stream.blocks_before_seal)} of ${blocks} blocks staged before the seal; after_seal ${String(pd.timings_ms.after_seal)} ms`)
})

const stagingLeft = (): string[] => readdirSync(childTmp).filter((name) => name.startsWith('pd-bridge-llama-staging-'))

it('the engine killed after its first segment: declined with its reason, nothing kept in llama.cpp\'s store, no staging directory left', async () => {
  expect(stagingLeft()).toEqual([])
  const prompt = buildDemoPrompt(tokenizer, 2000, 4402)
  const pending = ask(stack.urls.front, prompt.messages)
  const id = await waitFor(async () => (await (await fetch(`${stack.urls.prefill}/health`)).json() as { running: string | null }).running ?? undefined, HANG_LIMIT_MS, 'the engine running the capture')
  await waitFor(async () => {
    try { return (JSON.parse(readFileSync(join(stack.paths.captures, id, 'segments.json'), 'utf8')).segments.length as number) > 0 ? true : undefined } catch { return undefined }
  }, HANG_LIMIT_MS, 'the first segment published')
  const engine = stack.supervisor.started.find((c) => c.spec.name === 'prefill-engine')
  engine?.proc.kill('SIGKILL')
  const bridged = await pending
  expect(bridged.verdict).toMatch(/^declined: prefill engine unreachable during the prefill/)
  // States are built at the seal only: nothing was kept, and the verdict claims nothing.
  expect(bridged.verdict).not.toMatch(/whole blocks written/)
  expect(bridged.data.usage.prompt_tokens_details?.cached_tokens ?? 0).toBe(0)
  expect(bridged.data.choices[0].token_ids.length).toBeGreaterThan(0)
  expect(stagingLeft()).toEqual([])
})

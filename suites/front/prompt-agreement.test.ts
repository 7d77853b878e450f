// A front door refuses to start beside a decoder whose /health shows another tokenizer or chat
// template than the front door's checkpoint holds: the two would compute different token ids.
import { describe, it, expect, afterAll } from 'vitest'
import { once } from 'node:events'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pino from 'pino'
import { frontConfigSchema } from '../../src/config/index.ts'
import { startFrontDoor } from '../../src/front/index.ts'
import { buildTokenizerFiles, loadTokenizer } from '../../src/model/tokenizer/index.ts'

const servers: Server[] = []
afterAll(() => { for (const s of servers) s.close() })

function modelDir (template?: string, structure: 'gpt2' | 'deepseek-v3' = 'gpt2'): string {
  const dir = mkdtempSync(join(tmpdir(), 'pd-agree-'))
  const files = buildTokenizerFiles(512, 32768, [], { structure })
  writeFileSync(join(dir, 'tokenizer.json'), files['tokenizer.json'])
  const config = JSON.parse(files['tokenizer_config.json'])
  writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify(template === undefined ? config : { ...config, chat_template: template }))
  return dir
}

// A decoder that only answers /health, with the digests the decoder server shows for `dir`.
async function decoderFor (dir: string): Promise<string> {
  const t = await loadTokenizer(dir)
  const server = createServer((_, res) => {
    res.setHeader('content-type', 'application/json')
    res.end(JSON.stringify({ status: 'ok', model: 'm', tokenizer_digest: t.digest, chat_template_digest: t.chatFormat.digest }))
  })
  servers.push(server)
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

function start (decoderUrl: string, model: string) {
  const config = frontConfigSchema.parse({
    listen: { host: '127.0.0.1', port: 0 },
    decoder: { url: decoderUrl, model, modelName: 'm', cacheDir: join(model, 'cache') },
    prefill: { url: 'http://127.0.0.1:1' },
    share: { url: 'http://127.0.0.1:1' },
    sidecar: join(model, 'sidecar'),
    log: { level: 'silent' },
  })
  return startFrontDoor({ config, logger: pino({ level: 'silent' }) })
}

describe('front door and decoder prompts', () => {
  it('start together when tokenizer and template agree', async () => {
    const dir = modelDir()
    const front = await start(await decoderFor(dir), dir)
    await front.close()
  })

  it('refuse to start together when the chat templates differ', async () => {
    const decoder = await decoderFor(modelDir('{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}'))
    await expect(start(decoder, modelDir())).rejects.toThrow(/front door not started: chat template mismatch: the decoder renders chats with template digest [0-9a-f]{64}/)
  })

  it('refuse to start together when the tokenizers differ', async () => {
    const decoder = await decoderFor(modelDir(undefined, 'deepseek-v3'))
    await expect(start(decoder, modelDir())).rejects.toThrow(/front door not started: tokenizer mismatch/)
  })

  it('start when the decoder is not up yet (it is checked again before each bridge)', async () => {
    const dir = modelDir()
    const front = await start('http://127.0.0.1:1', dir)
    await front.close()
  })
})

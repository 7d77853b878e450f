// The registry of decoder kinds: names unique, the default first, every record complete (its homes
// exist, its flags its own), unknown names refused with every known one listed, and the decoder
// command's flag rule (another kind's flag refused, naming that kind) driven by the records.
import { existsSync, statSync } from 'node:fs'
import { join } from 'node:path'
import pino from 'pino'
import { describe, expect, it } from 'vitest'
import { parseFrontConfig } from '../../src/config/index.ts'
import type { DecoderCommandOptions } from '../../src/decoders/kind.ts'
import { checkDecoderFlags, DECODER_KIND_NAMES, DECODER_KINDS, DEFAULT_DECODER_KIND, decoderKind, findDecoderKind, kindNamesText } from '../../src/decoders/registry.ts'
import { DECODER_ROUTES } from '../../src/engines/decoder/routes.ts'
import { ConfigError } from '../../src/errors.ts'
import { startFrontDoor } from '../../src/front/index.ts'
import { decoderLabel, decoderThreads, startEmbeddedStack } from '../../src/stack/embedded.ts'

const ROOT = join(import.meta.dirname, '..', '..')

/** What commander gives `pd-bridge decoder` with only the required flags. */
const bare = (engine: string): DecoderCommandOptions => ({
  engine, model: '/m', profile: 'decoder', blockSize: 2048, host: '127.0.0.1', port: 0, maxTokens: 64, maxBodyBytes: 1024, maxQueue: 1,
})

describe('the registry', () => {
  it('lists each kind once, the default first, and finds them by name', () => {
    expect(new Set(DECODER_KIND_NAMES).size).toBe(DECODER_KINDS.length)
    expect(DEFAULT_DECODER_KIND).toBe(DECODER_KINDS[0])
    expect(decoderKind(undefined)).toBe(DEFAULT_DECODER_KIND)
    for (const k of DECODER_KINDS) {
      expect(decoderKind(k.name)).toBe(k)
      expect(findDecoderKind(k.name)).toBe(k)
    }
    expect(findDecoderKind('vllm')).toBeUndefined()
  })

  it('refuses an unknown name with a ConfigError naming the field, the source and every kind', () => {
    let err: unknown
    try { decoderKind('vllm', '--engine', 'environment') } catch (e) { err = e }
    expect(err).toBeInstanceOf(ConfigError)
    expect((err as Error).message).toBe(`environment: --engine: "vllm" is not one of ${DECODER_KIND_NAMES.join(', ')}`)
    expect(kindNamesText(['a'])).toBe('a')
    expect(kindNamesText(['a', 'b'])).toBe('a or b')
    expect(kindNamesText(['a', 'b', 'c'])).toBe('a, b or c')
  })

  it('the front door config takes any name; the front door refuses an unknown kind before it asks or listens', async () => {
    const config = (engine: string) => parseFrontConfig({ decoder: { url: 'http://127.0.0.1:9', engine } }).config
    expect(config('vllm').decoder.engine).toBe('vllm')
    await expect(startFrontDoor({ config: config('vllm'), logger: pino({ level: 'silent' }) })).rejects.toThrow(`decoder.engine: "vllm" is not one of ${DECODER_KIND_NAMES.join(', ')}`)
  })

  it('every record is complete: homes that exist, its own flags, client routes the decoder serves, a cache arithmetic', () => {
    const owner = new Map<string, string>()
    for (const k of DECODER_KINDS) {
      expect(k.summary.length, k.name).toBeGreaterThan(0)
      expect(k.homes.length, k.name).toBeGreaterThan(0)
      expect(k.homes).toContain(`src/decoders/${k.name.replace(/\./g, '-')}`)
      for (const h of k.homes) expect(existsSync(join(ROOT, h)) && statSync(join(ROOT, h)).isDirectory(), h).toBe(true)
      for (const f of k.command.flags) {
        expect(f, k.name).toMatch(/^--[a-z][a-z-]*$/)
        expect(owner.get(f), `${f} claimed twice`).toBeUndefined()
        owner.set(f, k.name)
      }
      expect(k.cacheMath.length).toBeGreaterThan(0)
      expect(k.store.label.length).toBeGreaterThan(0)
      for (const r of k.clientRoutes) expect(DECODER_ROUTES.some((d) => d.path === r.path), r.path).toBe(true)
    }
  })
})

describe('pd-bridge decoder\'s flags, from the records', () => {
  it('a flag only another kind takes is refused, naming that kind', () => {
    for (const kind of DECODER_KINDS) {
      for (const other of DECODER_KINDS.filter((o) => o !== kind)) {
        for (const flag of other.command.flags.filter((f) => !kind.command.flags.includes(f))) {
          const key = flag.slice(2).replace(/-([a-z])/g, (_m, c: string) => c.toUpperCase())
          const opts = { ...bare(kind.name), cacheDir: '/c', gguf: '/g.gguf', [key]: flag === '--kv-cache-type' ? 'F16' : 1 }
          // The kind's own required flags are given; only the foreign one is wrong.
          if (kind.command.flags.includes('--gguf') === false) delete (opts as Partial<DecoderCommandOptions>).gguf
          if (flag === '--gguf') (opts as Partial<DecoderCommandOptions>).gguf = '/g.gguf'
          // A kind pd-bridge cannot start (its `external` part) refuses every launch, saying so first.
          const expected = kind.external !== undefined ? /pd-bridge cannot start/ : new RegExp(`${flag.replace(/-/g, '\\-')}.*only with --engine ${other.name.replace(/\./g, '\\.')}`)
          expect(() => checkDecoderFlags(kind, opts as DecoderCommandOptions), `${flag} with ${kind.name}`).toThrow(expected)
        }
      }
    }
  })

  it('a kind pd-bridge cannot start refuses pd-bridge decoder and launch, and names serve flags of its own', async () => {
    const external = DECODER_KINDS.filter((k) => k.external !== undefined)
    expect(external.length).toBeGreaterThan(0)
    const serveFlags = new Set<string>()
    for (const kind of external) {
      expect(() => checkDecoderFlags(kind, { ...bare(kind.name), cacheDir: '/c' }), kind.name).toThrow(/pd-bridge cannot start/)
      await expect(kind.command.launch({ ...bare(kind.name), cacheDir: '/c' }, { logger: pino({ enabled: false }) })).rejects.toThrow(/pd-bridge cannot start/)
      expect(() => kind.stack.decoderArgs({ profile: kind.cacheMath, threads: 1 })).toThrow(/pd-bridge cannot start/)
      for (const f of Object.values(kind.external!.serveFlags)) {
        expect(f.flag).toMatch(/^--[a-z][a-z-]*$/)
        expect(serveFlags.has(f.flag), `${f.flag} claimed twice`).toBe(false)
        serveFlags.add(f.flag)
      }
    }
  })

  it('the kind\'s own flags pass; its required ones are required', () => {
    // The default kind: a block store, so --cache-dir is required.
    const kind = DEFAULT_DECODER_KIND
    expect(() => checkDecoderFlags(kind, { ...bare(kind.name), cacheDir: '/c', maxBatch: 2 })).not.toThrow()
    expect(() => checkDecoderFlags(kind, bare(kind.name))).toThrow(/--cache-dir is required/)
  })
})

describe('the records\' stack rules', () => {
  it('llama.cpp takes transformers captures in f32 only, and records name it with its threads; ours is not named', () => {
    const llama = findDecoderKind('llama.cpp')!
    expect(llama.stack.torchPrefillProblem?.('f32')).toBeUndefined()
    expect(llama.stack.torchPrefillProblem?.('bf16')).toMatch(/needs f32 captures.*would run bf16.*--torch-dtype f32/)
    expect(llama.stack.environmentLabel?.(7)).toBe('llama.cpp (f32 GGUF, F32 cache, 7 threads)')
    expect(llama.stack.decoderArgs({ profile: 'f32', gguf: '/g.gguf', threads: 7 })).toEqual(['--gguf', '/g.gguf', '--kv-cache-type', 'F32', '--threads', '7'])
    expect(DEFAULT_DECODER_KIND.stack.environmentLabel).toBeUndefined()
    expect(decoderLabel({ decoderEngine: DEFAULT_DECODER_KIND.name })).toBeUndefined()
    expect(decoderLabel({ decoderEngine: 'llama.cpp' })).toBe(`llama.cpp (f32 GGUF, F32 cache, ${decoderThreads()} threads)`)
  })

  it('the stack refuses an external kind without the running decoder\'s location, and a location for a kind it runs, before any work', async () => {
    for (const kind of DECODER_KINDS) {
      const where = { url: 'http://127.0.0.1:1', cacheDir: '/nonexistent', modelName: '/m' }
      const options = kind.external !== undefined ? {} : { externalDecoder: where }
      await expect(startEmbeddedStack({ stateDir: '/nonexistent/state', decoderEngine: kind.name, ...options }), kind.name)
        .rejects.toThrow(kind.external !== undefined ? /pd-bridge cannot start it; say where the running one is/ : /the stack runs this decoder itself/)
    }
  })
})

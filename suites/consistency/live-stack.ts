// A real bridge over a gate test deployment: `pd-bridge share`, `decoder` and a second decoder with
// an empty store (the decoder alone), then `prefill-engine` and `front`, all child processes on
// 127.0.0.1 reading the deployment's own files (its checkpoint, its sidecar directory). The prefill
// engine and the front door read the sidecar when they start, so a test that re-exports the sidecar
// restarts those two, as an operator would. The prefill engine refuses a sidecar whose rope tables
// are not its model's, so a stale sidecar runs beside a prefill node launched with the stale config.
import { mkdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { StackChild } from '../../src/stack/child.ts'
import type { Deployment } from './helpers.ts'
import { HANG_LIMIT_MS } from '../support/hang-limit.ts'

/** The block size of the deployment's sidecar and of the decoders' stores. */
export const LIVE_BLOCK = 256

/** A running bridge. */
export interface LiveStack {
  /** The front door (the bridged path). */
  front: () => string
  /** The decoder alone, on its own empty store. */
  nativeUrl: string
  /** The bridged decoder's block store. */
  cacheDir: string
  modelName: string
  /**
   * Stop the prefill engine and the front door and start them again (they re-read the sidecar); the
   * engine serves `prefillModel` (default the deployment's checkpoint).
   */
  restartBridge: (prefillModel?: string) => Promise<void>
  stop: () => Promise<void>
}

/** Start the bridge for `d` (its checkpoint must retrieve for needle tests: preset `needle`). */
export async function startLiveStack (d: Deployment): Promise<LiveStack> {
  const dir = join(d.root, 'live')
  const logDir = join(dir, 'logs')
  const captures = join(dir, 'captures')
  const cacheDir = join(dir, 'cache')
  const modelName = 'gate-needle-live'
  await mkdir(logDir, { recursive: true })
  await mkdir(captures, { recursive: true })
  const started: StackChild[] = []
  const start = async (name: string, args: string[]): Promise<StackChild> => {
    const child = StackChild.spawn({ name, args, logDir, readyTimeoutMs: HANG_LIMIT_MS })
    started.push(child)
    await child.waitReady()
    return child
  }
  const decoderArgs = (store: string): string[] => ['decoder', '--model', d.modelDir, '--profile', 'decoder', '--cache-dir', store, '--block-size', String(LIVE_BLOCK), '--port', '0', '--model-name', modelName]
  try {
    const [share, decoder, native] = await Promise.all([
      start('share', ['share', '--root', captures, '--port', '0']),
      start('decoder', decoderArgs(cacheDir)),
      start('decoder-native', decoderArgs(join(dir, 'native-cache'))),
    ])
    let engine: StackChild | undefined
    let front: StackChild | undefined
    let generation = 0
    const startBridge = async (prefillModel = d.modelDir): Promise<void> => {
      const n = generation++
      engine = await start(`prefill-engine-${n}`, ['prefill-engine', '--model', prefillModel, '--sidecar', d.sidecarDir, '--capture-root', captures, '--profile', 'decoder', '--port', '0'])
      const config = join(dir, `front-${n}.json`)
      await writeFile(config, JSON.stringify({
        listen: { host: '127.0.0.1', port: 0 },
        decoder: { url: decoder.ready!.url, model: d.modelDir, modelName, profile: 'decoder', cacheDir, blockSize: LIVE_BLOCK },
        prefill: { url: engine.ready!.url },
        share: { url: share.ready!.url },
        capture: { spoolDir: join(dir, 'spool') },
        sidecar: d.sidecarDir,
        routing: { minTokens: 2 * LIVE_BLOCK, minTail: LIVE_BLOCK, maxBridgeTokens: 32000 },
      }, null, 2))
      front = await start(`front-${n}`, ['front', '--config', config])
    }
    await startBridge()
    return {
      front: () => front!.ready!.url,
      nativeUrl: native.ready!.url,
      cacheDir,
      modelName,
      restartBridge: async (prefillModel) => {
        await front?.stop()
        await engine?.stop()
        await startBridge(prefillModel)
      },
      stop: async () => {
        for (const child of [...started].reverse()) await child.stop()
      },
    }
  }
  catch (err) {
    for (const child of [...started].reverse()) await child.stop()
    throw err
  }
}

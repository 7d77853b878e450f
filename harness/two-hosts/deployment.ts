// The two-host quick start of docs/two-hosts.md, run for real in two network namespaces: each host
// makes its own checkpoint and sidecar with the CLI, the prefill host runs `prefill-engine` and
// `share` on its link address, the decode host runs `decoder` (on its own loopback) and `front`
// (on its link address) with a front.json naming the prefill host's URLs. Every process gets the
// deployment key (PD_API_KEY). Beside the deployment, in this machine's own namespace, a decoder
// alone with an empty store answers the same prompts for comparison.
import { execFile } from 'node:child_process'
import { mkdir, rm, writeFile } from 'node:fs/promises'
import { createConnection, createServer, type Server, type Socket } from 'node:net'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { presetConfig } from '../../src/model/checkpoint/index.ts'
import { childArgv } from '../../src/stack/child.ts'
import { Supervisor, type SupervisorEvent } from '../../src/stack/supervisor.ts'
import { DECODE_ADDRESS, PREFILL_ADDRESS, type TwoHosts } from './netns.ts'

const execFileAsync = promisify(execFile)
const RELAY = fileURLToPath(new URL('./unix-relay.mjs', import.meta.url))
const DELAY_RELAY = fileURLToPath(new URL('./delay-relay.mjs', import.meta.url))

/** The ports of the quick start: fixed, since each host has its own network stack. */
export const TWO_HOST_PORTS = { prefillEngine: 8000, share: 8010, decoder: 8011, front: 8012 } as const
/** The delay relays' ports on the decode host's loopback (`restartFront` with a delay). */
export const DELAY_RELAY_PORTS = { prefillEngine: 8100, share: 8110 } as const

/** How the deployment is made. */
export interface DeploymentOptions {
  hosts: TwoHosts
  /** Where both hosts keep their files (`prefill-host/`, `decode-host/`, `alone/`, `logs/`); made fresh. */
  home: string
  preset: string
  seed: number
  blockSize: number
  /** The deployment key every process requires and sends. */
  apiKey: string
  /** The front door's progress deadline (deadlines.stallMs): the link faults are sized against it. */
  stallMs: number
  /**
   * The engine's own progress deadline (deadlines.engineStallMs): above the longest pause between
   * its answers on this loaded machine, so a busy engine is not taken for a cut link.
   */
  engineStallMs: number
  /** Routing threshold: prompts shorter than this go straight to the decoder. */
  minTokens: number
  readyTimeoutMs?: number
  onEvent?: (e: SupervisorEvent) => void
}

/** Where each host keeps its files. */
export interface HostDirs {
  model: string
  sidecar: string
}

/** A running two-host deployment. */
export interface Deployment {
  /** The front door as a client in this namespace reaches it (loopback, through the relay). */
  frontUrl: string
  /** The decoder alone (this namespace's loopback), for the native answers. */
  aloneUrl: string
  /** The front door's URL on the link, and the prefill host's URLs the front door uses. */
  linkUrls: { front: string, prefillEngine: string, share: string }
  modelName: string
  prefillHost: HostDirs & { captures: string }
  decodeHost: HostDirs & { cacheDir: string, spool: string, frontConfig: string }
  aloneCacheDir: string
  logDir: string
  supervisor: Supervisor
  /** SIGKILL the prefill host's processes (engine and share), as a crash of that machine does. */
  killPrefillHost: () => Promise<void>
  /** Start the prefill host's processes again (same ports, same capture root). */
  startPrefillHost: () => Promise<void>
  /**
   * Restart the front door, with the prefill host's URLs pointing at delay relays on the decode
   * host (`harness/two-hosts/delay-relay.mjs`: every chunk held `delayMs` in each direction) when
   * `delayMs` > 0, or straight across the link (the quick start's front.json) when 0. Waits for the
   * front door's ready line; the relays of an earlier delay are stopped. Says what the front door
   * now talks to.
   */
  restartFront: (delayMs: number) => Promise<{ prefillEngine: string, share: string }>
  /** Stop everything this deployment started (front door first); safe to call twice. */
  stop: () => Promise<void>
}

/** Run one pd-bridge command to its end on a host (`make-checkpoint`, `export-weights`). */
async function runOn (wrap: (argv: string[]) => string[], args: string[], env: NodeJS.ProcessEnv): Promise<void> {
  const argv = wrap(childArgv(args))
  await execFileAsync(argv[0], argv.slice(1), { env, maxBuffer: 16 * 1024 * 1024 })
}

/** The checkpoint and sidecar of the quick start's first two steps, made on one host. */
async function makeHostFiles (wrap: (argv: string[]) => string[], dir: string, o: DeploymentOptions, env: NodeJS.ProcessEnv): Promise<HostDirs> {
  const model = join(dir, 'model')
  const sidecar = join(dir, 'sidecar')
  await runOn(wrap, ['make-checkpoint', '--preset', o.preset, '--seed', String(o.seed), '--out', model], env)
  await runOn(wrap, ['export-weights', '--model', model, '--profile', 'decoder', '--block-size', String(o.blockSize), '--out', sidecar], env)
  return { model, sidecar }
}

/** The decode host's front.json: the decoder on its loopback, the prefill engine and share across the link. */
export function twoHostFrontConfig (d: { modelName: string, decodeHost: Deployment['decodeHost'], blockSize: number, minTokens: number, stallMs: number, engineStallMs: number, maxBridgeTokens: number }): Record<string, unknown> {
  return {
    listen: { host: DECODE_ADDRESS, port: TWO_HOST_PORTS.front },
    decoder: { url: `http://127.0.0.1:${TWO_HOST_PORTS.decoder}`, model: d.decodeHost.model, modelName: d.modelName, profile: 'decoder', cacheDir: d.decodeHost.cacheDir, blockSize: d.blockSize },
    prefill: { url: `http://${PREFILL_ADDRESS}:${TWO_HOST_PORTS.prefillEngine}` },
    share: { url: `http://${PREFILL_ADDRESS}:${TWO_HOST_PORTS.share}` },
    capture: { spoolDir: d.decodeHost.spool },
    sidecar: d.decodeHost.sidecar,
    routing: { minTokens: d.minTokens, minTail: d.blockSize, maxBridgeTokens: d.maxBridgeTokens },
    deadlines: { stallMs: d.stallMs, engineStallMs: d.engineStallMs },
    log: { file: join(d.decodeHost.spool, '..', 'front.log') },
  }
}

/**
 * A loopback TCP port in this namespace that pipes every connection to a Unix socket: the client's
 * end of the relay that runs on the decode host.
 */
async function loopbackToSocket (socketPath: string): Promise<{ url: string, close: () => Promise<void> }> {
  const open = new Set<Socket>()
  const server: Server = createServer((client) => {
    const target = createConnection(socketPath)
    open.add(client)
    client.on('close', () => open.delete(client))
    client.pipe(target).pipe(client)
    const end = (): void => { client.destroy(); target.destroy() }
    client.on('error', end)
    target.on('error', end)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as { port: number }).port
  return {
    url: `http://127.0.0.1:${port}`,
    close: async () => {
      for (const c of open) c.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

/** Make both hosts' files, start both halves and the decoder alone. On any failure what started is stopped. */
export async function startDeployment (o: DeploymentOptions): Promise<Deployment> {
  const { hosts } = o
  await rm(o.home, { recursive: true, force: true })
  const logDir = join(o.home, 'logs')
  await mkdir(logDir, { recursive: true })
  const env: NodeJS.ProcessEnv = { ...process.env, PD_API_KEY: o.apiKey }
  const prefillDir = join(o.home, 'prefill-host')
  const decodeDir = join(o.home, 'decode-host')
  const [prefillFiles, decodeFiles] = await Promise.all([
    makeHostFiles(hosts.onPrefillHost, prefillDir, o, env),
    makeHostFiles(hosts.onDecodeHost, decodeDir, o, env),
  ])
  const modelName = `pd-bridge-${o.preset}-seed${o.seed}`
  const prefillHost = { ...prefillFiles, captures: join(prefillDir, 'captures') }
  const decodeHost = { ...decodeFiles, cacheDir: join(decodeDir, 'cache'), spool: join(decodeDir, 'spool'), frontConfig: join(decodeDir, 'front.json') }
  const aloneCacheDir = join(o.home, 'alone', 'cache')
  await Promise.all([mkdir(prefillHost.captures, { recursive: true }), mkdir(decodeHost.cacheDir, { recursive: true }), mkdir(decodeHost.spool, { recursive: true }), mkdir(aloneCacheDir, { recursive: true })])

  const supervisor = new Supervisor({ logDir, graceMs: 5000, onEvent: o.onEvent })
  const readyTimeoutMs = o.readyTimeoutMs ?? 180_000
  const onPrefill = (name: string, args: string[]): Promise<unknown> => supervisor.start({ name, args, argv: hosts.onPrefillHost(childArgv(args)), env, readyTimeoutMs })
  const onDecode = (name: string, args: string[], argv = hosts.onDecodeHost(childArgv(args))): Promise<unknown> => supervisor.start({ name, args, argv, env, readyTimeoutMs })
  const decoderArgs = (cacheDir: string, host: string, port: number): string[] => ['decoder', '--model', decodeHost.model, '--cache-dir', cacheDir, '--block-size', String(o.blockSize),
    '--profile', 'decoder', '--model-name', modelName, '--host', host, '--port', String(port)]
  const startPrefillHost = async (): Promise<void> => {
    await Promise.all([
      onPrefill('prefill-engine', ['prefill-engine', '--model', prefillHost.model, '--sidecar', prefillHost.sidecar, '--capture-root', prefillHost.captures,
        '--profile', 'decoder', '--host', PREFILL_ADDRESS, '--port', String(TWO_HOST_PORTS.prefillEngine)]),
      onPrefill('share', ['share', '--root', prefillHost.captures, '--host', PREFILL_ADDRESS, '--port', String(TWO_HOST_PORTS.share)]),
    ])
  }
  let door: Awaited<ReturnType<typeof loopbackToSocket>> | undefined
  let stopped: Promise<void> | undefined
  const stop = async (): Promise<void> => {
    stopped ??= (async () => {
      await door?.close()
      // The front door first, so no bridge is left talking to a half that is already gone.
      const front = supervisor.started.find((c) => c.spec.name === 'front' && c.exit === undefined)
      await front?.stop(5000)
      await supervisor.stopAll()
      // What `ip netns exec` left in a group (nothing, it execs) is gone with the group kill.
      for (const c of supervisor.started) c.killGroup()
    })()
    await stopped
  }
  const maxBridgeTokens = presetConfig(o.preset).maxPositionEmbeddings - 256
  const frontConfig = (): Record<string, unknown> => twoHostFrontConfig({ modelName, decodeHost, blockSize: o.blockSize, minTokens: o.minTokens, stallMs: o.stallMs, engineStallMs: o.engineStallMs, maxBridgeTokens })
  const running = (name: string): Array<(typeof supervisor.started)[number]> => supervisor.started.filter((c) => c.spec.name === name && c.exit === undefined)
  const restartFront = async (delayMs: number): Promise<{ prefillEngine: string, share: string }> => {
    for (const name of ['front', 'delay-relay-engine', 'delay-relay-share']) for (const c of running(name)) await c.stop(5000)
    const config = frontConfig()
    let file = decodeHost.frontConfig
    if (delayMs > 0) {
      const relay = async (name: string, port: number, targetPort: number): Promise<string> => (await onDecode(name, [], hosts.onDecodeHost([process.execPath, DELAY_RELAY,
        '127.0.0.1', String(port), PREFILL_ADDRESS, String(targetPort), String(delayMs)])) as { url: string }).url
      const [engineUrl, shareUrl] = await Promise.all([
        relay('delay-relay-engine', DELAY_RELAY_PORTS.prefillEngine, TWO_HOST_PORTS.prefillEngine),
        relay('delay-relay-share', DELAY_RELAY_PORTS.share, TWO_HOST_PORTS.share),
      ])
      config.prefill = { url: engineUrl }
      config.share = { url: shareUrl }
      file = join(decodeHost.spool, '..', `front-delay-${delayMs}ms.json`)
    }
    await writeFile(file, JSON.stringify(config, null, 2) + '\n')
    await onDecode('front', ['front', '--config', file])
    return { prefillEngine: (config.prefill as { url: string }).url, share: (config.share as { url: string }).url }
  }
  try {
    await writeFile(decodeHost.frontConfig, JSON.stringify(frontConfig(), null, 2) + '\n')
    await Promise.all([
      startPrefillHost(),
      onDecode('decoder', decoderArgs(decodeHost.cacheDir, '127.0.0.1', TWO_HOST_PORTS.decoder)),
      // The decoder alone runs here, beside the deployment, not on either host.
      supervisor.start({ name: 'decoder-alone', args: decoderArgs(aloneCacheDir, '127.0.0.1', 0), env, readyTimeoutMs }),
    ])
    await onDecode('front', ['front', '--config', decodeHost.frontConfig])
    const socketPath = join(o.home, 'front.sock')
    await onDecode('relay', [], hosts.onDecodeHost([process.execPath, RELAY, socketPath, DECODE_ADDRESS, String(TWO_HOST_PORTS.front)]))
    door = await loopbackToSocket(socketPath)
    const alone = supervisor.started.find((c) => c.spec.name === 'decoder-alone')?.ready?.url ?? ''
    return {
      frontUrl: door.url,
      aloneUrl: alone,
      linkUrls: { front: `http://${DECODE_ADDRESS}:${TWO_HOST_PORTS.front}`, prefillEngine: `http://${PREFILL_ADDRESS}:${TWO_HOST_PORTS.prefillEngine}`, share: `http://${PREFILL_ADDRESS}:${TWO_HOST_PORTS.share}` },
      modelName, prefillHost, decodeHost, aloneCacheDir, logDir, supervisor,
      killPrefillHost: async () => {
        for (const c of supervisor.started.filter((c) => (c.spec.name === 'prefill-engine' || c.spec.name === 'share') && c.exit === undefined)) {
          c.killNow()
          await c.exited
        }
      },
      startPrefillHost,
      restartFront,
      stop,
    }
  }
  catch (e) {
    await stop()
    throw e
  }
}

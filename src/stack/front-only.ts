// `serve --config FILE`: a deployment whose engines run elsewhere needs only the front door here.
// It runs as a supervised child like every other process, with its log beside the others.
import { loadFrontConfig } from '../config/index.ts'
import type { StackEvent } from './embedded.ts'
import { Supervisor, type RestartPolicy } from './supervisor.ts'

/** The front door alone, supervised. */
export interface FrontOnly {
  urls: { front: string }
  supervisor: Supervisor
  /** How serve restarts the front door: the config's `restarts` with the PD_RESTART_* variables. */
  restarts: RestartPolicy
  logDir: string
  stop: () => Promise<void>
}

/** Check the config here (a bad file is refused before anything starts), then start the front door with it. */
export async function startFrontOnly (options: { config: string, stateDir: string, readyTimeoutMs?: number, onEvent?: (e: StackEvent) => void }): Promise<FrontOnly> {
  const loaded = await loadFrontConfig({ file: options.config })
  const logDir = `${options.stateDir}/logs`
  const supervisor = new Supervisor({ logDir, onEvent: options.onEvent })
  try {
    const front = await supervisor.start({ name: 'front', args: ['front', '--config', loaded.file ?? options.config], readyTimeoutMs: options.readyTimeoutMs ?? 60_000 })
    return { urls: { front: front.url }, supervisor, restarts: loaded.config.restarts, logDir, stop: async () => await supervisor.stopAll() }
  }
  catch (err) {
    await supervisor.stopAll()
    throw err
  }
}

// The embedded deployment as the gate's subject (`pd-bridge gate --embedded`): the stack a state
// directory runs. A stack already running from it (`pd-bridge serve`) is gated as it runs; else the
// gate starts one itself, the way serve would (making or reusing the checkpoint and the sidecar, the
// config and launch files written in <state>/run/), gates it, and stops it. So CI needs no prior
// `serve`, and `<state>/run/front.json` need not exist beforehand.
import { join } from 'node:path'
import { isAlive, readStackRecord } from '../../src/stack/record.ts'
import { startEmbeddedStack } from '../../src/stack/embedded.ts'
import type { PresetName } from '../../src/model/checkpoint/index.ts'

/**
 * The preset the gate starts when none is given: `needle`, the tiny preset's architecture, window
 * and block geometry with weights that retrieve a needle (docs/needle-checkpoint.md). The tiny
 * preset's random weights cannot retrieve one, so a consistent tiny stack can never show the
 * needle law; with `needle` a consistent embedded deployment passes.
 */
export const GATE_EMBEDDED_PRESET: PresetName = 'needle'

/** The deployment the gate checks, and how to let it go. */
export interface EmbeddedTarget {
  /** The front door's generated config (<state>/run/front.json); launch.env is beside it. */
  config: string
  /** The front door, for the self-run needle. */
  frontUrl: string
  /** True when the gate started the stack itself (and stops it); false for a running serve. */
  started: boolean
  /** The preset it runs. */
  preset: string
  /** Stop what the gate started; nothing for a running serve. */
  release: () => Promise<void>
}

/** The stack running from `stateDir`, or a new one of `preset` started there on a free port. */
export async function embeddedTarget (stateDir: string, preset: PresetName, say: (line: string) => void): Promise<EmbeddedTarget> {
  const record = await readStackRecord(join(stateDir, 'stack.json'))
  if (record !== undefined && isAlive(record.supervisorPid)) {
    say(`window gate: gating the stack running from ${stateDir} (pid ${record.supervisorPid}, preset ${record.preset}, front door ${record.frontUrl})`)
    return { config: record.frontConfig, frontUrl: record.frontUrl, started: false, preset: record.preset, release: async () => {} }
  }
  say(`window gate: no stack runs from ${stateDir}; starting the embedded stack (preset ${preset}) there`)
  const stack = await startEmbeddedStack({ stateDir, preset, port: 0 })
  say(`window gate: embedded stack ready, front door ${stack.urls.front} (pids ${stack.record.processes.map((p) => `${p.name} ${p.pid}`).join(', ')})`)
  return {
    config: stack.paths.frontConfig,
    frontUrl: stack.urls.front,
    started: true,
    preset,
    release: async () => {
      await stack.stop()
      say('window gate: embedded stack stopped')
    },
  }
}

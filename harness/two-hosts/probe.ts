// What the link carries on this machine: one bulk TCP transfer from the prefill host to the decode
// host (link-probe.mjs on each side). On a busy 2-core machine the result is often bound by the
// CPU, not the token bucket; the records keep it beside the link's nominal rate so a reader can tell.
import { execFile, spawn } from 'node:child_process'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { PREFILL_ADDRESS, type TwoHosts } from './netns.ts'

const PROBE = fileURLToPath(new URL('./link-probe.mjs', import.meta.url))
const PROBE_PORT = 8099
const execFileAsync = promisify(execFile)

/** The probe's result: bytes received, in how long, and the rate. */
export interface LinkProbe {
  bytes: number
  ms: number
  bitsPerSecond: number
}

/** Send `bytes` across the link once and time it at the receiver. */
export async function probeLink (hosts: TwoHosts, bytes: number): Promise<LinkProbe> {
  const argv = hosts.onPrefillHost([process.execPath, PROBE, 'send', PREFILL_ADDRESS, String(PROBE_PORT), String(bytes)])
  const sender = spawn(argv[0], argv.slice(1), { stdio: ['ignore', 'pipe', 'inherit'] })
  try {
    const [first] = await once(sender.stdout, 'data') as [Buffer]
    if (!first.toString().includes('listening')) throw new Error(`link probe: the sender said ${first.toString()}`)
    const recv = hosts.onDecodeHost([process.execPath, PROBE, 'receive', PREFILL_ADDRESS, String(PROBE_PORT)])
    const { stdout } = await execFileAsync(recv[0], recv.slice(1))
    return JSON.parse(stdout) as LinkProbe
  }
  finally {
    sender.kill('SIGKILL')
  }
}

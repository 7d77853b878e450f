// Two hosts on one machine: two network namespaces joined by a veth pair, the link shaped with tc,
// cut and healed with `ip link`, and torn down whatever happens. The prefill side lives in one
// namespace, the decode side in the other; nothing but the veth joins them.
//
// Addresses are from 198.18.0.0/15 (RFC 2544's benchmarking range): 198.18.0.1 for the prefill
// host, 198.18.0.2 for the decode host, a /30 between them. Names carry a tag unique per run (the
// pid and a random suffix), so parallel runs never meet, and `leftovers(tag)` proves nothing stayed.
import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'

/** The prefill host's and the decode host's address on the link. */
export const PREFILL_ADDRESS = '198.18.0.1'
export const DECODE_ADDRESS = '198.18.0.2'
const PREFIX_LENGTH = 30

/** How the link is shaped: a token-bucket rate, and what netem adds when the kernel has it. */
export interface LinkProfile {
  /** Short name used in records (`10gbe`, `1gbe`). */
  name: string
  /** Token-bucket rate in bits per second, each direction. */
  rateBitsPerSecond: number
  /** One-way delay netem adds, ms (0: none asked). */
  delayMs: number
  /** Random loss netem adds, percent (0: none asked). */
  lossPercent: number
}

/** A LAN as measured: 10 Gbit/s, a tenth of a millisecond each way; and the slower 1 Gbit/s profile. */
export const LINK_PROFILES: Record<string, LinkProfile> = {
  '10gbe': { name: '10gbe', rateBitsPerSecond: 10e9, delayMs: 0.1, lossPercent: 0 },
  '1gbe': { name: '1gbe', rateBitsPerSecond: 1e9, delayMs: 0.1, lossPercent: 0 },
}

/** What was really applied to the link (netem may be missing from the kernel: then no delay or loss). */
export interface AppliedShape {
  profile: LinkProfile
  /** The qdiscs on each end, as `tc qdisc show` prints them. */
  qdiscs: string[]
  /** Whether netem's delay and loss are on the link; false when the kernel has no sch_netem. */
  netem: boolean
  /** Why netem is not on the link, or null. */
  netemMissing: string | null
}

function run (argv: string[]): string {
  return execFileSync(argv[0], argv.slice(1), { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
}

/** Run a command that may fail: its output, or the error's text. */
function attempt (argv: string[]): { ok: boolean, text: string } {
  try {
    return { ok: true, text: run(argv) }
  }
  catch (e) {
    const err = e as { stderr?: string, message: string }
    return { ok: false, text: (err.stderr ?? '').trim() || err.message }
  }
}

/**
 * Why two namespaces cannot be made here (not root, no `ip`, namespaces refused), or null when
 * they can. Probes by making and removing a namespace of its own.
 */
export function namespacesUnavailable (): string | null {
  if (process.platform !== 'linux') return `network namespaces need Linux (this is ${process.platform})`
  if (process.getuid?.() !== 0) return 'network namespaces need root (this process is not uid 0)'
  const probe = `pdprobe${process.pid}${randomBytes(2).toString('hex')}`
  try {
    run(['ip', 'netns', 'add', probe])
  }
  catch (e) {
    const err = e as { code?: string, stderr?: string, message: string }
    if (err.code === 'ENOENT') return 'the `ip` command (iproute2) is not installed'
    return `\`ip netns add\` was refused: ${(err.stderr ?? err.message).trim()}`
  }
  attempt(['ip', 'netns', 'del', probe])
  return null
}

/** Loss put on the link by nftables (`setLoss`). */
export interface AppliedLoss {
  /** Whether the rules are in both namespaces. */
  applied: boolean
  /** Each end's table as `nft list table` prints it, one line. */
  rules: string[]
  /** Why the loss is not on the link (no `nft`, nf_tables refused), or null. */
  missing: string | null
}

/** The nftables table the loss rules live in, one per namespace. */
export const LOSS_TABLE = 'pdbridge_loss'

/**
 * Random loss on each end's input from the link. The input hook, not output: the packet has
 * crossed the veth (tc counted it as sent) and is lost before the receiving TCP sees it, as on a
 * lossy wire; a drop in the sender's own output path is reported to its TCP at once.
 */
function applyLoss (ends: Array<[string, string]>, percent: number): AppliedLoss {
  clearLossRules(ends)
  const rules: string[] = []
  for (const [ns, dev] of ends) {
    const nft = (args: string[]): string[] => ['ip', 'netns', 'exec', ns, 'nft', ...args]
    for (const step of [
      ['add', 'table', 'inet', LOSS_TABLE],
      ['add', 'chain', 'inet', LOSS_TABLE, 'input', '{ type filter hook input priority 0 ; policy accept ; }'],
      ['add', 'rule', 'inet', LOSS_TABLE, 'input', 'iifname', dev, 'numgen', 'random', 'mod', '100', '<', String(percent), 'counter', 'drop'],
    ]) {
      const r = attempt(nft(step))
      if (!r.ok) {
        clearLossRules(ends)
        return { applied: false, rules: [], missing: `nft ${step.slice(0, 3).join(' ')} failed: ${r.text.split('\n')[0]}` }
      }
    }
    rules.push(`${ns}: ${attempt(nft(['list', 'table', 'inet', LOSS_TABLE])).text.trim().replace(/\s+/g, ' ')}`)
  }
  return { applied: true, rules, missing: null }
}

function clearLossRules (ends: Array<[string, string]>): void {
  for (const [ns] of ends) attempt(['ip', 'netns', 'exec', ns, 'nft', 'delete', 'table', 'inet', LOSS_TABLE])
}

/** Two namespaces joined by a veth pair, the link's state and its teardown. */
export interface TwoHosts {
  tag: string
  prefillNs: string
  decodeNs: string
  /** The veth end in each namespace. */
  prefillIf: string
  decodeIf: string
  /** `ip netns exec <ns>` for a command to run on that host. */
  onPrefillHost: (argv: string[]) => string[]
  onDecodeHost: (argv: string[]) => string[]
  /** Shape both directions (replacing any shape before). */
  shape: (profile: LinkProfile) => AppliedShape
  /** Pull the link down on both ends (a cut cable), or bring it back. */
  linkDown: () => void
  linkUp: () => void
  /**
   * Drop `percent`% of the packets each host receives from the link, at random (nftables: a table
   * of its own in each namespace, an input-hook rule `iifname <veth> numgen random mod 100 < N
   * counter drop`), replacing any loss before. Says what was applied (the rules as `nft` lists them), or why
   * not. The kernel's own netem is the other way; this one needs only nf_tables.
   */
  setLoss: (percent: number) => AppliedLoss
  /** Packets the loss rules dropped so far on each end (their counters), 0 where none is there. */
  lossDropped: () => { prefill: number, decode: number }
  /** Remove the loss rules (the table) from both namespaces; safe when none is there. */
  clearLoss: () => void
  /** Bytes and packets the prefill end sent and dropped so far (tc's counters of its root qdisc). */
  counters: () => { prefillSentBytes: number, decodeSentBytes: number }
  /** Remove both namespaces (and with them the veth); safe to call twice. */
  destroy: () => void
}

/** A fresh tag: short enough for interface names (15 characters at most). */
export function freshTag (): string {
  return `pd${(process.pid % 100000).toString(36)}${randomBytes(2).toString('hex')}`
}

/**
 * Make the two hosts. Every step that fails removes what was made before it. The namespaces are
 * also removed at this process's exit (a test worker that dies, a protocol stopped with Ctrl-C).
 */
export function makeTwoHosts (tag = freshTag()): TwoHosts {
  const prefillNs = `${tag}-prefill`
  const decodeNs = `${tag}-decode`
  const prefillIf = `${tag}p`
  const decodeIf = `${tag}d`
  let destroyed = false
  const destroy = (): void => {
    if (destroyed) return
    destroyed = true
    process.off('exit', destroy)
    // Deleting a namespace deletes the veth end inside it, and with it the peer, and its nftables
    // tables (the loss rules live in the namespace's own ruleset).
    for (const ns of [prefillNs, decodeNs]) attempt(['ip', 'netns', 'del', ns])
    attempt(['ip', 'link', 'del', prefillIf])
  }
  process.on('exit', destroy)
  try {
    run(['ip', 'netns', 'add', prefillNs])
    run(['ip', 'netns', 'add', decodeNs])
    run(['ip', 'link', 'add', prefillIf, 'type', 'veth', 'peer', 'name', decodeIf])
    run(['ip', 'link', 'set', prefillIf, 'netns', prefillNs])
    run(['ip', 'link', 'set', decodeIf, 'netns', decodeNs])
    run(['ip', '-n', prefillNs, 'addr', 'add', `${PREFILL_ADDRESS}/${PREFIX_LENGTH}`, 'dev', prefillIf])
    run(['ip', '-n', decodeNs, 'addr', 'add', `${DECODE_ADDRESS}/${PREFIX_LENGTH}`, 'dev', decodeIf])
    for (const [ns, dev] of [[prefillNs, prefillIf], [decodeNs, decodeIf]]) {
      run(['ip', '-n', ns, 'link', 'set', 'lo', 'up'])
      run(['ip', '-n', ns, 'link', 'set', dev, 'up'])
    }
  }
  catch (e) {
    destroy()
    throw e
  }
  const ends: Array<[string, string]> = [[prefillNs, prefillIf], [decodeNs, decodeIf]]
  const sentBytes = (ns: string, dev: string): number => {
    const text = attempt(['ip', 'netns', 'exec', ns, 'tc', '-s', 'qdisc', 'show', 'dev', dev]).text
    return Number(/Sent (\d+) bytes/.exec(text)?.[1] ?? 0)
  }
  return {
    tag, prefillNs, decodeNs, prefillIf, decodeIf,
    onPrefillHost: (argv) => ['ip', 'netns', 'exec', prefillNs, ...argv],
    onDecodeHost: (argv) => ['ip', 'netns', 'exec', decodeNs, ...argv],
    shape: (profile) => shapeLink(ends, profile),
    setLoss: (percent) => applyLoss(ends, percent),
    lossDropped: () => {
      const dropped = (ns: string): number => Number(/counter packets (\d+)/.exec(attempt(['ip', 'netns', 'exec', ns, 'nft', 'list', 'table', 'inet', LOSS_TABLE]).text)?.[1] ?? 0)
      return { prefill: dropped(prefillNs), decode: dropped(decodeNs) }
    },
    clearLoss: () => clearLossRules(ends),
    linkDown: () => { for (const [ns, dev] of ends) run(['ip', '-n', ns, 'link', 'set', dev, 'down']) },
    linkUp: () => { for (const [ns, dev] of ends) run(['ip', '-n', ns, 'link', 'set', dev, 'up']) },
    counters: () => ({ prefillSentBytes: sentBytes(prefillNs, prefillIf), decodeSentBytes: sentBytes(decodeNs, decodeIf) }),
    destroy,
  }
}

/**
 * The token bucket for a rate: a burst of at least one 64 KiB segment and a millisecond at the
 * rate (tbf refuses a burst below rate / HZ), a queue of 50 ms.
 */
function tbfArgs (rateBitsPerSecond: number): string[] {
  const burst = Math.max(65536 * 2, Math.ceil(rateBitsPerSecond / 8 / 1000))
  return ['tbf', 'rate', `${rateBitsPerSecond}bit`, 'burst', String(burst), 'latency', '50ms']
}

/**
 * Shape each end's egress: netem (delay, loss) at the root with the token bucket under it when the
 * kernel has netem, else the token bucket alone. Says which it was; the records carry it.
 */
function shapeLink (ends: Array<[string, string]>, profile: LinkProfile): AppliedShape {
  const wantsNetem = profile.delayMs > 0 || profile.lossPercent > 0
  let netemMissing: string | null = wantsNetem ? null : 'not asked for'
  const qdiscs: string[] = []
  for (const [ns, dev] of ends) {
    const tc = (args: string[]): string[] => ['ip', 'netns', 'exec', ns, 'tc', ...args]
    attempt(tc(['qdisc', 'del', 'dev', dev, 'root']))
    let netemOn = false
    if (wantsNetem && netemMissing === null) {
      const netem = ['netem', ...(profile.delayMs > 0 ? ['delay', `${profile.delayMs}ms`] : []), ...(profile.lossPercent > 0 ? ['loss', `${profile.lossPercent}%`] : []), 'limit', '100000']
      const added = attempt(tc(['qdisc', 'add', 'dev', dev, 'root', 'handle', '1:', ...netem]))
      if (added.ok) netemOn = true
      else netemMissing = `tc refused netem (${added.text.split('\n')[0]}): this kernel has no sch_netem, so no delay or loss is added`
    }
    run(tc(['qdisc', 'add', 'dev', dev, ...(netemOn ? ['parent', '1:', 'handle', '2:'] : ['root', 'handle', '1:']), ...tbfArgs(profile.rateBitsPerSecond)]))
    qdiscs.push(`${dev}: ${run(tc(['qdisc', 'show', 'dev', dev])).trim().replace(/\s+/g, ' ')}`)
  }
  return { profile, qdiscs, netem: netemMissing === null, netemMissing: netemMissing === 'not asked for' ? null : netemMissing }
}

/** Namespaces and interfaces whose name carries `tag`: empty when a teardown left nothing. */
export function leftovers (tag: string): { namespaces: string[], links: string[] } {
  const namespaces = attempt(['ip', 'netns', 'list']).text.split('\n').map((l) => l.split(' ')[0]).filter((n) => n.includes(tag))
  const links = attempt(['ip', '-o', 'link', 'show']).text.split('\n').map((l) => l.split(':')[1]?.trim().split('@')[0] ?? '').filter((n) => n.includes(tag))
  return { namespaces, links }
}

/**
 * This machine's own namespace's loss tables (nothing when no rule ever left the namespaces it was
 * put in; the namespaces' tables die with them). Null when `nft` is not here to ask.
 */
export function lossTablesHere (): string[] | null {
  const r = attempt(['nft', 'list', 'tables'])
  if (!r.ok) return null
  return r.text.split('\n').filter((l) => l.includes(LOSS_TABLE))
}

// Progress of a long run, on stderr (docs/progress.md). One idea: `startProgress({ label, total,
// unit })` gives `tick(done)`, `log(line)`, `done()` and `fail()`.
//
// - On a terminal: one live line (done/total, percent, rate, ETA, the caller's note), redrawn in
//   place at most every `redrawMs` (default 200 ms, so at most 5 times a second), finished with a
//   line that stays.
// - Anywhere else (a pipe, a CI log, a file): JSON lines, one when a tick comes at least
//   `intervalMs` (default 5 s) after the last line (or the start), and one at the end:
//   {"progress":label,"done":n,"total":t,"unit":u,"rate":r,"eta_s":s,"elapsed_s":e}. A run that
//   ends before its first interval prints nothing: short runs stay quiet.
//
// Everything is driven by the caller's ticks, never by a timer: a run that blocks the event loop
// (a synchronous forward, a tensor generator) still reports, and tests inject the clock and the
// stream and need no sleeps. PD_PROGRESS=auto|tty|json|off overrides the choice.
import { PdBridgeError } from '../errors.ts'

/** Where the progress goes: stderr in the CLI, a fake in tests. */
export interface ProgressStream {
  write: (text: string) => unknown
  isTTY?: boolean
  /** Terminal width; the live line is cut to fit so the redraw never wraps. */
  columns?: number
}

/** How progress is shown: a live line, JSON lines, or nothing. `auto` picks tty or json from the stream. */
export type ProgressMode = 'auto' | 'tty' | 'json' | 'off'

const MODES: readonly ProgressMode[] = ['auto', 'tty', 'json', 'off']

/** A caller's note on a tick: text for the live line, or fields added to the JSON line. */
export type ProgressExtra = string | Record<string, string | number | boolean | null>

/** What to show progress of. */
export interface ProgressOptions {
  /** What runs, e.g. `cold-bench` or `make-checkpoint small`. */
  label: string
  /** How many units the whole run has; unknown when absent (no percent, no ETA). */
  total?: number
  /** What is counted: `runs`, `tensors`, `tokens`. Default `items`. */
  unit?: string
  /** Default process.stderr. */
  stream?: ProgressStream
  /** Milliseconds, monotonic. Default performance.now. */
  now?: () => number
  /** Default: $PD_PROGRESS, else auto. */
  mode?: ProgressMode
  /** JSON mode: the least time between two lines (default 5000 ms). */
  intervalMs?: number
  /** TTY mode: the least time between two redraws (default 200 ms). */
  redrawMs?: number
  /** Where PD_PROGRESS is read (default process.env). */
  env?: NodeJS.ProcessEnv
}

/** A run's progress. After done() or fail(), further calls do nothing. */
export interface Progress {
  /** The mode in use (never `auto`). */
  readonly mode: 'tty' | 'json' | 'off'
  /** `done` units of `total` are finished; `extra` says what is under way. */
  tick: (done: number, extra?: ProgressExtra) => void
  /** A line of its own (a step's result): on a terminal it goes above the live line. */
  log: (line: string) => void
  /** The run finished (its count is the last tick's). */
  done: (extra?: ProgressExtra) => void
  /** The run stopped before its end. */
  fail: (reason?: string) => void
}

/** One JSON progress line's fields (what the non-TTY mode writes, parsed back). */
export interface ProgressLine {
  progress: string
  done: number
  total: number | null
  unit: string
  /** Units per second since the start; null before any time has passed. */
  rate: number | null
  /** Seconds left at that rate; null without a total or a rate. */
  eta_s: number | null
  elapsed_s: number
  /** Only on the last line. */
  state?: 'done' | 'failed'
  error?: string
  note?: string
  [field: string]: unknown
}

const CLEAR_LINE = '\r\x1b[2K'
const CORE_FIELDS = new Set(['progress', 'done', 'total', 'unit', 'rate', 'eta_s', 'elapsed_s', 'state', 'error'])

/** The mode for `stream` under `mode` (or $PD_PROGRESS): auto is tty on a terminal (not TERM=dumb), else json. */
export function resolveProgressMode (stream: ProgressStream, mode?: ProgressMode, env: NodeJS.ProcessEnv = process.env): 'tty' | 'json' | 'off' {
  let chosen = mode
  if (chosen === undefined) {
    const fromEnv = env.PD_PROGRESS
    if (fromEnv !== undefined && fromEnv !== '') {
      if (!(MODES as readonly string[]).includes(fromEnv)) throw new PdBridgeError(`PD_PROGRESS must be one of ${MODES.join(', ')}, got ${JSON.stringify(fromEnv)}`)
      chosen = fromEnv as ProgressMode
    }
  }
  if (chosen === undefined || chosen === 'auto') return stream.isTTY === true && env.TERM !== 'dumb' ? 'tty' : 'json'
  return chosen
}

/** Seconds as `42s`, `7m05s`, `2h03m`. */
export function formatDuration (seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return '?'
  const s = Math.round(seconds)
  if (s < 60) return `${s}s`
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`
}

/** A rate in words, per second, minute or hour, whichever gives at least 1. */
export function formatRate (perSecond: number | null, unit: string): string {
  if (perSecond === null || !Number.isFinite(perSecond)) return `- ${unit}/s`
  const sig = (x: number) => (x >= 100 ? Math.round(x).toLocaleString('en-US') : x >= 10 ? x.toFixed(1) : x.toFixed(2))
  if (perSecond >= 1 || perSecond === 0) return `${sig(perSecond)} ${unit}/s`
  if (perSecond * 60 >= 1) return `${sig(perSecond * 60)} ${unit}/min`
  return `${sig(perSecond * 3600)} ${unit}/h`
}

function count (n: number): string {
  return n.toLocaleString('en-US')
}

function extraText (extra: ProgressExtra | undefined): string {
  if (extra === undefined) return ''
  if (typeof extra === 'string') return extra
  return Object.entries(extra).map(([k, v]) => `${k} ${String(v)}`).join(', ')
}

const NOOP: Progress = { mode: 'off', tick: () => {}, log: () => {}, done: () => {}, fail: () => {} }

/** Start showing the progress of one run. */
export function startProgress (opts: ProgressOptions): Progress {
  const stream = opts.stream ?? process.stderr
  const mode = resolveProgressMode(stream, opts.mode, opts.env)
  const total = opts.total
  if (total !== undefined && (!Number.isFinite(total) || total < 0)) throw new PdBridgeError(`progress ${opts.label}: total must be a non-negative number, got ${String(total)}`)
  if (mode === 'off') {
    return { ...NOOP, log: (line) => { stream.write(line.endsWith('\n') ? line : line + '\n') } }
  }
  const unit = opts.unit ?? 'items'
  const now = opts.now ?? (() => performance.now())
  const intervalMs = opts.intervalMs ?? 5000
  const redrawMs = opts.redrawMs ?? 200
  const started = now()
  let current = 0
  let note: ProgressExtra | undefined
  let finished = false
  // TTY: whether the live line is on screen, and when it was last drawn. JSON: when the last line went out.
  let drawn = false
  let lastDraw = Number.NEGATIVE_INFINITY
  let lastLine = started
  let lines = 0

  const measure = (at: number) => {
    const elapsedS = Math.max(0, (at - started) / 1000)
    const rate = elapsedS > 0 ? current / elapsedS : null
    const eta = total === undefined || rate === null || rate <= 0 ? null : Math.max(0, total - current) / rate
    return { elapsedS, rate, eta }
  }

  const jsonLine = (at: number, end?: { state: 'done' | 'failed', error?: string }) => {
    const m = measure(at)
    const line: ProgressLine = {
      progress: opts.label,
      done: current,
      total: total ?? null,
      unit,
      rate: m.rate === null ? null : Number(m.rate.toPrecision(4)),
      eta_s: end?.state === 'done' ? 0 : m.eta === null ? null : Math.round(m.eta * 10) / 10,
      elapsed_s: Math.round(m.elapsedS * 10) / 10,
    }
    if (end !== undefined) line.state = end.state
    if (end?.error !== undefined) line.error = end.error
    if (typeof note === 'string' && note !== '') line.note = note
    else if (note !== undefined && typeof note === 'object') for (const [k, v] of Object.entries(note)) if (!CORE_FIELDS.has(k)) line[k] = v
    stream.write(JSON.stringify(line) + '\n')
    lines++
    lastLine = at
  }

  const fit = (text: string) => {
    const width = stream.columns
    return width !== undefined && width > 1 && text.length > width - 1 ? text.slice(0, width - 2) + '…' : text
  }

  const liveText = (at: number) => {
    const m = measure(at)
    const parts = [opts.label]
    if (total !== undefined) {
      parts.push(`${count(current)}/${count(total)} ${unit}`)
      parts.push(`${total > 0 ? Math.floor((100 * current) / total) : 100}%`)
    }
    else parts.push(`${count(current)} ${unit}`)
    parts.push(formatRate(m.rate, unit))
    parts.push(m.eta === null ? `${formatDuration(m.elapsedS)} elapsed` : `ETA ${formatDuration(m.eta)}`)
    const extra = extraText(note)
    if (extra !== '') parts.push(extra)
    return parts.join('  ')
  }

  const draw = (at: number) => {
    stream.write(`${CLEAR_LINE}${fit(liveText(at))}`)
    drawn = true
    lastDraw = at
  }

  const finish = (end: { state: 'done' | 'failed', error?: string }) => {
    const at = now()
    if (mode === 'json') {
      // A run that never reached its first interval stays quiet.
      if (lines > 0 || at - started >= intervalMs) jsonLine(at, end)
      return
    }
    const m = measure(at)
    const counted = total === undefined ? `${count(current)} ${unit}` : `${count(current)}/${count(total)} ${unit}`
    const text = end.state === 'done'
      ? `${opts.label}  ${counted} in ${formatDuration(m.elapsedS)} (${formatRate(m.rate, unit)})`
      : `${opts.label}  failed at ${counted} after ${formatDuration(m.elapsedS)}${end.error === undefined ? '' : `: ${end.error}`}`
    stream.write(`${drawn ? CLEAR_LINE : ''}${fit(text)}\n`)
    drawn = false
  }

  if (mode === 'tty') draw(started)

  return {
    mode,
    tick (done, extra) {
      if (finished) return
      current = done
      if (extra !== undefined) note = extra
      const at = now()
      if (mode === 'tty') {
        if (at - lastDraw >= redrawMs) draw(at)
      }
      else if (at - lastLine >= intervalMs) jsonLine(at)
    },
    log (line) {
      const text = line.endsWith('\n') ? line : line + '\n'
      if (mode !== 'tty' || finished) {
        stream.write(text)
        return
      }
      stream.write(`${drawn ? CLEAR_LINE : ''}${text}`)
      draw(now())
    },
    done (extra) {
      if (finished) return
      if (extra !== undefined) note = extra
      finished = true
      finish({ state: 'done' })
    },
    fail (reason) {
      if (finished) return
      finished = true
      finish({ state: 'failed', error: reason })
    },
  }
}

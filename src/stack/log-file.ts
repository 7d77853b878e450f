// One log file per process, every line a JSON object: a child's JSON lines (pino, the share's
// request records, ready lines) go in as they are; anything else it prints (a plain URL, a
// one-sentence refusal) is wrapped in a pino-shaped record, so the file stays machine-readable.
import { createWriteStream, mkdirSync, type WriteStream } from 'node:fs'
import { dirname } from 'node:path'

/** pino's numeric levels for the two kinds of wrapped lines. */
const INFO = 30
const ERROR = 50

/** True when `line` is one JSON object (what pino and our servers write). */
export function isJsonObjectLine (line: string): boolean {
  if (!line.startsWith('{')) return false
  try {
    const v: unknown = JSON.parse(line)
    return typeof v === 'object' && v !== null && !Array.isArray(v)
  }
  catch {
    return false
  }
}

/** The JSON line to store for one line a child printed on `stream`. */
export function logRecordFor (line: string, name: string, pid: number | undefined, stream: 'stdout' | 'stderr', now = Date.now()): string {
  if (isJsonObjectLine(line)) return line
  return JSON.stringify({ level: stream === 'stderr' ? ERROR : INFO, time: now, pid, name, stream, msg: line })
}

/** An append-only JSON-lines log file that also remembers its last lines for error messages. */
export class ProcessLog {
  private readonly out: WriteStream
  private readonly tail: string[] = []
  private readonly pending = { stdout: '', stderr: '' }

  constructor (readonly path: string, readonly name: string, private readonly tailLines = 20) {
    mkdirSync(dirname(path), { recursive: true })
    this.out = createWriteStream(path, { flags: 'a' })
    // A full disk must not crash the supervisor; the log is a record, not a dependency.
    this.out.on('error', () => {})
  }

  /** Feed raw output of `stream`; complete lines are stored, and handed to `onLine`. */
  feed (chunk: string, stream: 'stdout' | 'stderr', pid: number | undefined, onLine?: (line: string) => void): void {
    const text = this.pending[stream] + chunk
    const lines = text.split('\n')
    this.pending[stream] = lines.pop() ?? ''
    for (const raw of lines) this.line(raw.replace(/\r$/, ''), stream, pid, onLine)
  }

  /** Store whatever is left without a newline (the process ended mid-line). */
  flushPartial (pid: number | undefined): void {
    for (const stream of ['stdout', 'stderr'] as const) {
      if (this.pending[stream] !== '') this.line(this.pending[stream], stream, pid)
      this.pending[stream] = ''
    }
  }

  /** Write one supervisor record about this process (start, exit, signal). */
  note (fields: Record<string, unknown>, msg: string): void {
    this.out.write(JSON.stringify({ level: INFO, time: Date.now(), name: this.name, source: 'supervisor', ...fields, msg }) + '\n')
  }

  /** The last lines the process printed, oldest first. */
  lastLines (): string[] {
    return [...this.tail]
  }

  /** Close the file once everything written so far is flushed. */
  async close (): Promise<void> {
    await new Promise<void>((resolve) => this.out.end(resolve))
  }

  private line (line: string, stream: 'stdout' | 'stderr', pid: number | undefined, onLine?: (line: string) => void): void {
    if (line === '') return
    this.tail.push(line)
    if (this.tail.length > this.tailLines) this.tail.shift()
    this.out.write(logRecordFor(line, this.name, pid, stream) + '\n')
    onLine?.(line)
  }
}

// What the demo shows while it works: on a terminal, one status line redrawn in place (a spinner,
// the current step, its elapsed time) with finished steps printed above it; anywhere else (a pipe,
// a CI log, a test), plain lines, one per step, nothing redrawn.

const SPINNER = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏']
const CLEAR_LINE = '\r\x1b[2K'

/** The writable side the progress goes to (stderr in the CLI). */
export interface ProgressStream {
  write: (text: string) => boolean
  isTTY?: boolean
}

/** The demo's progress display. */
export class Progress {
  private step: string | undefined
  private stepStarted = 0
  private frame = 0
  private timer: NodeJS.Timeout | undefined
  readonly live: boolean

  constructor (private readonly out: ProgressStream, private readonly prefix = 'pd-bridge demo') {
    this.live = out.isTTY === true
  }

  /** Begin a step (the previous one, if any, is finished first). */
  begin (text: string): void {
    this.end()
    this.step = text
    this.stepStarted = Date.now()
    if (!this.live) {
      this.out.write(`${this.prefix}: ${text}\n`)
      return
    }
    this.draw()
    this.timer = setInterval(() => this.draw(), 100)
    this.timer.unref()
  }

  /** Update the current step's text (a count going up) without starting a new one. */
  update (text: string): void {
    if (this.step === undefined) return this.begin(text)
    this.step = text
    if (this.live) this.draw()
  }

  /** A permanent line (a process became ready, a step's result). */
  note (text: string): void {
    if (!this.live) {
      this.out.write(`${this.prefix}: ${text}\n`)
      return
    }
    this.out.write(`${CLEAR_LINE}  ${text}\n`)
    if (this.step !== undefined) this.draw()
  }

  /** Finish the current step: on a terminal its line stays, with a tick and the time it took. */
  end (failed = false): void {
    if (this.step === undefined) return
    if (this.timer !== undefined) clearInterval(this.timer)
    this.timer = undefined
    if (this.live) this.out.write(`${CLEAR_LINE}${failed ? '✗' : '✓'} ${this.step} (${this.elapsed()})\n`)
    this.step = undefined
  }

  private elapsed (): string {
    return `${((Date.now() - this.stepStarted) / 1000).toFixed(1)} s`
  }

  private draw (): void {
    this.frame = (this.frame + 1) % SPINNER.length
    this.out.write(`${CLEAR_LINE}${SPINNER[this.frame]} ${this.step ?? ''} (${this.elapsed()})`)
  }
}

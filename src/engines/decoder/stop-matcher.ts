// Stop sequences over streamed text: text is released only once no stop sequence can still begin
// in it, so a stream never sends characters that a later match would have cut.

/** What one push gives back. */
export interface StopStep {
  /** Text safe to send now. */
  text: string
  /** A stop sequence was found; `text` ends right before it and nothing more may be sent. */
  stopped: boolean
}

/**
 * Finds the first stop string to complete in the generated text (the earliest end; on a tie the
 * longest) and cuts the text where it starts. Held back: the longest suffix that is a proper prefix
 * of some stop string (a match can only start there).
 */
export class StopMatcher {
  private held = ''
  private done = false
  private readonly longest: number

  constructor (private readonly stops: readonly string[]) {
    this.longest = stops.reduce((m, s) => Math.max(m, s.length), 0)
  }

  /** Feed the next final piece of text. */
  push (piece: string): StopStep {
    if (this.done) return { text: '', stopped: true }
    const text = this.held + piece
    // The match that ends first wins (the longest on a tie): that is what a reader of the stream
    // sees complete first, so the answer does not depend on how the text was split into pieces.
    let cut = -1
    let cutEnd = Infinity
    for (const stop of this.stops) {
      const at = text.indexOf(stop)
      if (at < 0) continue
      const end = at + stop.length
      if (end < cutEnd || (end === cutEnd && at < cut)) {
        cut = at
        cutEnd = end
      }
    }
    if (cut >= 0) {
      this.done = true
      this.held = ''
      return { text: text.slice(0, cut), stopped: true }
    }
    const keep = this.heldBackLength(text)
    this.held = text.slice(text.length - keep)
    return { text: text.slice(0, text.length - keep), stopped: false }
  }

  /** The generation ended without a stop: release what was held back. */
  flush (): string {
    const rest = this.done ? '' : this.held
    this.held = ''
    this.done = true
    return rest
  }

  private heldBackLength (text: string): number {
    for (let k = Math.min(this.longest - 1, text.length); k > 0; k--) {
      const suffix = text.slice(text.length - k)
      if (this.stops.some((s) => s.length > k && s.startsWith(suffix))) return k
    }
    return 0
  }
}

// The writer's memory instrument: the bytes of block data it holds right now, by part (the
// block-local cache, a read in flight, the built payload), and the most it ever held at once.
// Parts are set from the arrays' real sizes at each step, so the peak is measured, not estimated.

/** What the writer holds, by part. */
export type HeldPart = 'cache' | 'read' | 'payload'

/** Held bytes now and at their peak. */
export class HeldBytes {
  private readonly parts: Record<HeldPart, number> = { cache: 0, read: 0, payload: 0 }
  private peakBytes = 0

  /** Bytes held now (sum of the parts). */
  get current (): number {
    return this.parts.cache + this.parts.read + this.parts.payload
  }

  /** The most bytes held at once so far. */
  get peak (): number {
    return this.peakBytes
  }

  /** Part `part` now holds `bytes`. */
  set (part: HeldPart, bytes: number): void {
    this.parts[part] = bytes
    if (this.current > this.peakBytes) this.peakBytes = this.current
  }

  /** Everything released (between blocks). */
  clear (): void {
    this.parts.cache = this.parts.read = this.parts.payload = 0
  }
}

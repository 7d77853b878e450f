// Bridges in flight, by the tokens they capture, so two cold prompts sharing a prefix do not
// prefill the shared blocks twice: a bridge whose prompt shares at least one full block with one
// in flight waits for it to end, then routes again, finding those blocks stored, and continues from
// them (a warm-extended bridge: docs/warm-extend.md) or needs no bridge at all. A claim is
// registered in the same synchronous step as the look-up, so of two prompts arriving together the
// second always sees the first.

/** One bridge in flight: the tokens it captures and when it ends. */
interface Claim {
  tokens: readonly number[]
  ended: Promise<void>
}

/** Full blocks two token lists share from the start, up to `limit` tokens of the first. */
function sharedBlocks (a: readonly number[], b: readonly number[], blockSize: number): number {
  const n = Math.min(a.length, b.length)
  let i = 0
  while (i < n && a[i] === b[i]) i++
  return Math.floor(i / blockSize)
}

/** What entering found: the bridge to wait for (if any), and this bridge's own claim to release. */
export interface Entered {
  /** The latest bridge in flight that shares a full block with this prompt; undefined when none. */
  waitFor: Promise<void> | undefined
  /** Blocks shared with it. */
  sharedBlocks: number
  release: () => void
}

/** The front door's bridges in flight. */
export class PrefixClaims {
  private readonly claims = new Set<Claim>()

  /** Register a bridge of `tokens` (the tokens it will capture) and find the one it must wait for. */
  enter (tokens: readonly number[], blockSize: number): Entered {
    let waitFor: Claim | undefined
    let shared = 0
    for (const c of this.claims) {
      const s = sharedBlocks(tokens, c.tokens, blockSize)
      // The latest claim wins: it already waits for the earlier ones it shares with.
      if (s > 0) {
        waitFor = c
        shared = s
      }
    }
    let release!: () => void
    const claim: Claim = { tokens, ended: new Promise<void>((resolve) => { release = resolve }) }
    this.claims.add(claim)
    return {
      waitFor: waitFor?.ended,
      sharedBlocks: shared,
      release: () => {
        this.claims.delete(claim)
        release()
      },
    }
  }

  /** Bridges in flight now. */
  get size (): number {
    return this.claims.size
  }
}

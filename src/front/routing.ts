// The routing rule: which prompts are worth bridging. Short prompts and prompts the decoder has
// (almost) cached go straight to the decoder; prompts past the envelope guard are never bridged;
// the rest are bridged up to the last full block the decoder can use.

/** The thresholds (FrontConfig['routing']). */
export interface RoutingRules {
  minTokens: number
  minTail: number
  maxBridgeTokens: number
}

/** What the rule looks at. */
export interface RouteInput {
  /** T, the prompt's tokens. */
  promptTokens: number
  /** Full blocks of the prompt already servable in the decoder's store, from its start. */
  storedBlocks: number
  blockSize: number
}

/** Bridge `blocks` full blocks (`bridgeTokens` = blocks * blockSize), or go straight to the decoder. */
export type Route =
  | { bridge: true, blocks: number, bridgeTokens: number, cachedTokens: number }
  | { bridge: false, reason: string, cachedTokens: number, /** Set when the reason counts stored tokens (a warm prompt). */ stored?: number }

/**
 * Full blocks of a T-token prompt the decoder can restore: floor((T - 1) / bs). The decoder must
 * prefill at least one token to get logits, so the block holding the prompt's last token is never
 * restored (a prompt of exactly k blocks can use k - 1).
 */
export function usableBlocks (promptTokens: number, blockSize: number): number {
  return promptTokens < 1 ? 0 : Math.floor((promptTokens - 1) / blockSize)
}

/**
 * Decide, in order: shorter than minTokens -> short prompt; longer than maxBridgeTokens -> over the
 * guard; no usable full block -> nothing to bridge; fewer than minTail uncached tokens -> warm
 * prompt; every usable block already stored -> nothing new; otherwise bridge every usable block
 * (blocks already stored are kept as they are by the writer).
 */
export function decideRoute (input: RouteInput, rules: RoutingRules): Route {
  const { promptTokens: t, blockSize: bs } = input
  const usable = usableBlocks(t, bs)
  const cachedTokens = Math.min(input.storedBlocks, usable) * bs
  if (t < rules.minTokens) return { bridge: false, reason: `short prompt (${t} tokens < PD_MIN_TOKENS ${rules.minTokens})`, cachedTokens }
  if (t > rules.maxBridgeTokens) return { bridge: false, reason: `prompt over the envelope guard (${t} tokens > PD_MAX_BRIDGE_TOKENS ${rules.maxBridgeTokens})`, cachedTokens }
  if (usable === 0) return { bridge: false, reason: `no full block to bridge (${t} tokens, block size ${bs})`, cachedTokens }
  const tail = t - cachedTokens
  if (tail < rules.minTail) return { bridge: false, reason: `warm prompt (${cachedTokens} of ${t} tokens stored; ${tail} not stored < PD_MIN_TAIL ${rules.minTail})`, cachedTokens, stored: cachedTokens }
  if (cachedTokens >= usable * bs) return { bridge: false, reason: `warm prompt (all ${usable} usable blocks stored)`, cachedTokens, stored: cachedTokens }
  return { bridge: true, blocks: usable, bridgeTokens: usable * bs, cachedTokens }
}

// Block keys are hashes of token ids, so the front door must turn a request into the decoder's
// ids exactly: same tokenizer.json, same chat format. The decoder shows the digests of both in
// /health; a difference is refused (at start, and before any bridge), never found as a silent miss.
import type { FrontConfig } from '../config/index.ts'
import { loadTokenizer, type Tokenizer } from '../model/tokenizer/index.ts'
import { checkLink, decoderFacts, type DecoderFacts } from './links.ts'
import { missingForBridge } from './setup.ts'

/** Why the front door's prompts would differ from the decoder's, or undefined when they agree (or the decoder does not say). */
export function promptMismatch (facts: DecoderFacts, tokenizer: Tokenizer, modelDir: string): string | undefined {
  if (facts.tokenizerDigest !== undefined && facts.tokenizerDigest !== tokenizer.digest) {
    return `tokenizer mismatch: the decoder's tokenizer.json has digest ${facts.tokenizerDigest}, the front door's (${modelDir}) ${tokenizer.digest}; the two would compute different token ids`
  }
  if (facts.chatTemplateDigest !== undefined && facts.chatTemplateDigest !== tokenizer.chatFormat.digest) {
    return `chat template mismatch: the decoder renders chats with template digest ${facts.chatTemplateDigest}, the front door (${modelDir}) with ${tokenizer.chatFormat.digest}; the two would render different prompts`
  }
  return undefined
}

/**
 * At start: when bridging is configured and the decoder already answers, load the front door's
 * tokenizer and hold it against the decoder's digests. A decoder that is not up yet is checked
 * before each bridge instead (link-report.ts).
 */
export async function mismatchAtStart (config: FrontConfig, auth: Record<string, string>): Promise<string | undefined> {
  if (missingForBridge(config) !== undefined) return undefined
  const link = await checkLink('decoder', config.decoder.url, config.deadlines.linkMs, auth)
  const facts = decoderFacts(link.health)
  if (facts.tokenizerDigest === undefined && facts.chatTemplateDigest === undefined) return undefined
  const dir = config.decoder.model as string
  return promptMismatch(facts, await loadTokenizer(dir), dir)
}

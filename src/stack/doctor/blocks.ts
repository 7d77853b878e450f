// The doctor's `blocks` check: are the decoder's blocks authenticated (a keyed digest under the
// deployment's block key, written and checked), or only integrity-checked (a plain digest, which
// anyone who can write the store can recompute)? And is the key this shell derives the decoder's?
// The front door writes blocks with the key of its own environment; a front door and a decoder with
// different keys make every bridged block a refused one.
import { blockKeyFromEnv } from '../../config/block-key.ts'
import type { Checklist } from './checks.ts'
import { field } from './probe.ts'

const NOT_AUTHENTICATED = 'blocks are integrity-checked (content_sha256) but not authenticated: anyone who can write the store can change a block and recompute its digest, and the decoder serves it. Set PD_BLOCK_KEY (or PD_API_KEY) for every process to authenticate them (docs/block-store.md, "Authentication")'

/** Judge the decoder's `cache.authentication` (its /health) against the block key of `env`. */
export function checkBlockAuthentication (list: Checklist, decoder: unknown, env: NodeJS.ProcessEnv = process.env): void {
  const auth = field(decoder, 'cache', 'authentication')
  if (decoder === undefined) {
    list.skip('blocks', 'the decoder did not answer: whether its blocks are authenticated is not known')
    return
  }
  if (auth === null || typeof auth !== 'object') {
    list.skip('blocks', 'the decoder\'s /health does not say whether its blocks are authenticated (no prefix cache, or an older decoder)')
    return
  }
  const ours = blockKeyFromEnv(env)
  if (field(auth, 'authenticated') !== true) {
    if (ours !== undefined) list.fail('blocks', `this environment has a block key (${ours.source}, key id ${ours.id}) but the decoder authenticates nothing: start it with the same ${ours.source}`)
    else list.warn('blocks', NOT_AUTHENTICATED)
    return
  }
  const id = String(field(auth, 'key_id'))
  const source = String(field(auth, 'key_source'))
  if (ours === undefined) {
    list.warn('blocks', `the decoder authenticates blocks (key id ${id}, from its ${source}), but this environment has no PD_BLOCK_KEY or PD_API_KEY: a front door started from it would write blocks the decoder refuses`)
  } else if (ours.id !== id) {
    list.fail('blocks', `the decoder authenticates blocks with key id ${id} (from its ${source}), this environment's key is ${ours.id} (from ${ours.source}): every block the front door writes would be refused and quarantined; set the same key for every process`)
  } else {
    list.pass('blocks', `blocks are authenticated: HMAC-SHA-256 under the block key (key id ${id}, from ${source}) written and checked before use; this environment has the same key`)
  }
}

// doctor's `blocks` check, in process, on what a decoder's /health says (cache.authentication) and
// the block key of the environment doctor runs in: blocks integrity-checked but not authenticated
// (a warning that says so), authenticated with this environment's key (pass), with another key or
// none here (a failure or a warning naming both key ids, never a key), and nothing to judge (skip).
import { describe, expect, it } from 'vitest'
import { blockAuthDescription, blockKeyFromEnv, deriveBlockKey } from '../../src/config/block-key.ts'
import { checkBlockAuthentication } from '../../src/stack/doctor/blocks.ts'
import { Checklist } from '../../src/stack/doctor/checks.ts'

function judge (decoder: unknown, env: NodeJS.ProcessEnv): { status: string, detail: string } {
  const list = new Checklist()
  checkBlockAuthentication(list, decoder, env)
  expect(list.checks.map((c) => c.name)).toEqual(['blocks'])
  return list.checks[0]
}

const health = (key: ReturnType<typeof deriveBlockKey> | undefined): unknown => ({ status: 'ok', cache: { dir: 'x', authentication: blockAuthDescription(key) } })

describe('doctor: blocks', () => {
  it('without a key anywhere: integrity-checked but not authenticated (a warning)', () => {
    const c = judge(health(undefined), {})
    expect(c.status).toBe('warn')
    expect(c.detail).toMatch(/^blocks are integrity-checked \(content_sha256\) but not authenticated: anyone who can write the store can change a block and recompute its digest/)
  })

  it('the decoder\'s key is this environment\'s: pass, naming the key id and where it came from', () => {
    const env = { PD_API_KEY: 'shared-secret' }
    const c = judge(health(blockKeyFromEnv(env)), env)
    expect(c.status).toBe('pass')
    expect(c.detail).toBe(`blocks are authenticated: HMAC-SHA-256 under the block key (key id ${blockKeyFromEnv(env)!.id}, from PD_API_KEY) written and checked before use; this environment has the same key`)
    expect(c.detail).not.toContain('shared-secret')
  })

  it('another key here: a failure naming both ids (every bridged block would be refused)', () => {
    const c = judge(health(deriveBlockKey('decoder-key')), { PD_BLOCK_KEY: 'front-key' })
    expect(c.status).toBe('fail')
    expect(c.detail).toContain(`key id ${deriveBlockKey('decoder-key').id}`)
    expect(c.detail).toContain(`this environment's key is ${deriveBlockKey('front-key').id} (from PD_BLOCK_KEY)`)
    expect(c.detail).not.toMatch(/decoder-key|front-key/)
  })

  it('a key here and none on the decoder: a failure; the decoder keyed and none here: a warning', () => {
    expect(judge(health(undefined), { PD_BLOCK_KEY: 'k' }).status).toBe('fail')
    const c = judge(health(deriveBlockKey('k')), {})
    expect(c.status).toBe('warn')
    expect(c.detail).toMatch(/this environment has no PD_BLOCK_KEY or PD_API_KEY/)
  })

  it('nothing to judge: the decoder down, or a /health without the field', () => {
    expect(judge(undefined, {}).status).toBe('skip')
    expect(judge({ status: 'ok' }, {}).status).toBe('skip')
  })
})

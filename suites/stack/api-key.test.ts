// The embedded stack with PD_API_KEY in the environment: `pd-bridge demo` starts every child with
// it (childEnvironment keeps it: it is not a front door override), every child requires it, the
// front door and the demo send it, and the bridged leg is still complete with identical answers.
// The key also keys the store (the block key is derived from it): the blocks the bridge wrote and
// the decoder served carry keyed digests under that derived key.
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { blockKeyFromEnv } from '../../src/config/block-key.ts'
import { verifyBlockDir } from '../../src/decode/store/index.ts'
import { envWith, runCli, tempDir } from './helpers.ts'
import { childEnvironment } from '../../src/stack/embedded.ts'

const tmp = tempDir('stack-key')
afterAll(() => tmp.remove())

describe('PD_API_KEY on the embedded stack', () => {
  it('children inherit the key (it is not stripped with the PD_* overrides)', () => {
    const env = childEnvironment({ PD_API_KEY: 'k', PD_PORT: '1', PATH: '/bin' })
    expect(env).toEqual({ PD_API_KEY: 'k', PATH: '/bin' })
  })

  it('the demo bridges complete with the key set everywhere', async () => {
    const r = await runCli(['demo', '--tokens', '600', '--max-tokens', '8', '--prompt-seed', '11'], { ...envWith(join(tmp.dir, 'state')), PD_API_KEY: 'stack-test-key-3d' })
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toMatch(/verdict +complete \(512 tokens bridged\)/)
    expect(r.stdout).toContain('PASS: verdict complete')
    // verify-blocks' two directories: the bridge's blocks and the native decoder's, each authenticated under the derived key.
    const dirs = /pd-bridge verify-blocks (\S+) (\S+)/.exec(r.stdout)
    expect(dirs).not.toBeNull()
    const key = blockKeyFromEnv({ PD_API_KEY: 'stack-test-key-3d' })!.key
    for (const dir of [dirs![1], dirs![2]]) {
      const v = await verifyBlockDir(dir, key)
      expect(v.blocks.length).toBeGreaterThan(0)
      expect(v).toMatchObject({ ok: v.blocks.length, unauthenticated: 0, authenticated: true })
    }
    expect(r.stdout + r.stderr).not.toContain('stack-test-key-3d')
  })
})

// The embedded stack with PD_API_KEY in the environment: `pd-bridge demo` starts every child with
// it (childEnvironment keeps it: it is not a front door override), every child requires it, the
// front door and the demo send it, and the bridged leg is still complete with identical answers.
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
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
  })
})

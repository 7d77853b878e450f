// protocols/repeat-tests.sh's refusals: it runs the whole suite N times, so a bad flag must stop it
// before anything is cloned or installed (the full series itself is a protocol, never npm test).
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'

const SCRIPT = new URL('../../protocols/repeat-tests.sh', import.meta.url).pathname
const run = async (args: string[]): Promise<{ code: number, stderr: string }> => {
  try {
    const r = await promisify(execFile)('bash', [SCRIPT, ...args])
    return { code: 0, stderr: r.stderr }
  } catch (e) {
    const err = e as { code: number, stderr: string }
    return { code: err.code, stderr: err.stderr }
  }
}

describe('protocols/repeat-tests.sh', () => {
  it('refuses an unknown option, a run count that is not a positive integer and a commit that does not exist, with exit 2', async () => {
    expect(await run(['--bogus'])).toMatchObject({ code: 2, stderr: expect.stringContaining('unknown option --bogus') })
    expect(await run(['--runs', 'ten'])).toMatchObject({ code: 2, stderr: expect.stringContaining("--runs needs a positive integer, got 'ten'") })
    expect(await run(['--runs', '0'])).toMatchObject({ code: 2, stderr: expect.stringContaining("--runs needs a positive integer, got '0'") })
    expect(await run(['--commit', 'no-such-rev-xyz'])).toMatchObject({ code: 2, stderr: expect.stringContaining('no such commit no-such-rev-xyz') })
  })
})

// serve, demo and doctor refuse to start on a missing or broken native build, in one line that says
// what to run. There is no product switch that points the loader elsewhere, so the check itself is
// tested with paths of its own; the commands call it first thing (src/cli/commands/{serve,demo,doctor}.ts).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { requireNativeKernels } from '../../src/cli/commands/serve.ts'
import { PdBridgeError } from '../../src/errors.ts'
import { DEFAULT_ADDON_PATH } from '../../src/kernels/index.ts'

const dir = mkdtempSync(join(tmpdir(), 'pd-bridge-native-check-'))
afterAll(() => { rmSync(dir, { recursive: true, force: true }) })

function refusal (command: string, path: string): PdBridgeError {
  try {
    requireNativeKernels(command, path)
  }
  catch (err) {
    expect(err).toBeInstanceOf(PdBridgeError)
    return err as PdBridgeError
  }
  throw new Error(`requireNativeKernels accepted ${path}`)
}

describe('requireNativeKernels', () => {
  it('a missing build: one line naming the addon and npm run build:native', () => {
    const path = join(dir, 'absent', 'pdb_kernels.node')
    expect(refusal('demo', path).message).toBe(`demo cannot start: native kernels ${path} is not built: run npm run build:native`)
  })

  it('a broken build (not a shared object): one line, the loader\'s reason, npm run build:native', () => {
    const path = join(dir, 'pdb_kernels.node')
    writeFileSync(path, 'not an ELF file\n')
    const message = refusal('serve', path).message
    expect(message).toMatch(/^serve cannot start: native kernels .*pdb_kernels\.node failed to load \(.+\): run npm run build:native$/)
    expect(message).not.toContain('\n')
  })

  it('the checkout\'s own build passes', () => {
    expect(() => { requireNativeKernels('doctor', DEFAULT_ADDON_PATH) }).not.toThrow()
  })
})

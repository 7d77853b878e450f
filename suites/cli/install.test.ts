// What `npm ci` leaves behind and how native/build.mjs chooses: the local bin link, the Node headers
// it builds against (no download), and the npx run that never rebuilds the working tree.
import { execFile } from 'node:child_process'
import { lstatSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, describe, expect, it } from 'vitest'

const run = promisify(execFile)
const root = fileURLToPath(new URL('../..', import.meta.url))
const buildScript = join(root, 'native', 'build.mjs')
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string, scripts: Record<string, string> }
const tmp = mkdtempSync(join(tmpdir(), 'pd-bridge-install-'))
afterAll(() => { rmSync(tmp, { recursive: true, force: true }) })

interface Found { dir?: string, source?: string, looked: string[], notes: string[] }
interface BuildModule {
  hasNodeHeaders: (dir: string) => boolean
  findNodeHeaders: (o: { execPath: string, env: Record<string, string | undefined> }) => Found
  noHeadersMessage: (looked: string[], version?: string) => string
  findNodeGyp: (o: { execPath: string, env: Record<string, string | undefined> }) => string[]
  linkBin: (root: string) => string
  addonProblem: (path?: string) => string | undefined
}
const build = await import(buildScript) as BuildModule

/** A fake Node install under tmp: <prefix>/bin/node, with or without include/node. */
function fakePrefix (name: string, headers: boolean): string {
  const prefix = join(tmp, name)
  mkdirSync(join(prefix, 'bin'), { recursive: true })
  writeFileSync(join(prefix, 'bin', 'node'), '')
  if (headers) {
    mkdirSync(join(prefix, 'include', 'node'), { recursive: true })
    writeFileSync(join(prefix, 'include', 'node', 'node.h'), '')
    writeFileSync(join(prefix, 'include', 'node', 'common.gypi'), '{}')
  }
  return prefix
}

describe('node_modules/.bin/pd-bridge', () => {
  it('the install step links it to the checkout\'s CLI, and it runs', async () => {
    expect(pkg.scripts.install).toBe('node native/build.mjs --install')
    expect(pkg.scripts['build:native']).toBe('node native/build.mjs')
    const link = join(root, 'node_modules', '.bin', 'pd-bridge')
    expect(lstatSync(link).isSymbolicLink()).toBe(true)
    expect(realpathSync(link)).toBe(realpathSync(join(root, 'bin', 'pd-bridge.mjs')))
    const { stdout } = await run(link, ['--version'])
    expect(stdout).toBe(`${pkg.version}\n`)
  })

  it('linkBin is idempotent, replaces anything else there, and concurrent runs agree', async () => {
    const fake = join(tmp, 'checkout')
    mkdirSync(join(fake, 'bin'), { recursive: true })
    writeFileSync(join(fake, 'bin', 'pd-bridge.mjs'), '#!/usr/bin/env node\n', { mode: 0o755 })
    const link = build.linkBin(fake)
    expect(readlinkSync(link)).toBe('../../bin/pd-bridge.mjs')
    const before = lstatSync(link)
    build.linkBin(fake)
    expect(lstatSync(link).ino).toBe(before.ino)
    rmSync(link)
    writeFileSync(link, 'a stale shim')
    build.linkBin(fake)
    expect(readlinkSync(link)).toBe('../../bin/pd-bridge.mjs')
    rmSync(link)
    const code = `import(${JSON.stringify(buildScript)}).then((m) => m.linkBin(${JSON.stringify(fake)}))`
    await Promise.all([1, 2, 3, 4].map(async () => await run(process.execPath, ['-e', code])))
    expect(readlinkSync(link)).toBe('../../bin/pd-bridge.mjs')
  })
})

describe('the Node headers native/build.mjs builds against', () => {
  it('the ones bundled next to node (<prefix>/include/node), whatever npm config says', () => {
    const prefix = fakePrefix('bundled', true)
    const found = build.findNodeHeaders({ execPath: join(prefix, 'bin', 'node'), env: {} })
    expect(found).toMatchObject({ dir: prefix, source: 'bundled' })
    const empty = join(tmp, 'empty-nodedir')
    mkdirSync(empty, { recursive: true })
    const ignored = build.findNodeHeaders({ execPath: join(prefix, 'bin', 'node'), env: { npm_config_nodedir: empty } })
    expect(ignored).toMatchObject({ dir: prefix, source: 'bundled' })
    expect(ignored.notes).toEqual([`npm_config_nodedir=${empty} holds no Node headers (include/node/node.h); ignoring it`])
  })

  it('an npm_config_nodedir that holds headers wins', () => {
    const prefix = fakePrefix('bundled2', true)
    const other = fakePrefix('other-headers', true)
    expect(build.findNodeHeaders({ execPath: join(prefix, 'bin', 'node'), env: { npm_config_nodedir: other } }))
      .toMatchObject({ dir: other, source: 'npm_config_nodedir' })
  })

  it('none found: no nodedir, and the failure message says what to set, in one line', () => {
    const prefix = fakePrefix('bare', false)
    const found = build.findNodeHeaders({ execPath: join(prefix, 'bin', 'node'), env: {} })
    expect(found.dir).toBeUndefined()
    expect(found.looked).toContain(join(prefix, 'include', 'node'))
    const message = build.noHeadersMessage(found.looked, 'v20.20.2')
    expect(message).not.toContain('\n')
    expect(message).toContain(`looked in ${join(prefix, 'include', 'node')}`)
    expect(message).toContain('set npm_config_nodedir to a directory holding include/node/node.h for v20.20.2')
    expect(message).toMatch(/headers package .*then run npm run build:native$/)
  })

  it('node-gyp: npm\'s own when npm names it', () => {
    const gyp = join(tmp, 'node-gyp.js')
    writeFileSync(gyp, '')
    expect(build.findNodeGyp({ execPath: process.execPath, env: { npm_config_node_gyp: gyp } })).toEqual([process.execPath, gyp])
  })
})

describe('the install script as npx runs it', () => {
  it('npm_command=exec: checks the addon, never builds, leaves native/build as it is', async () => {
    const addon = join(root, 'native', 'build', 'Release', 'pdb_kernels.node')
    const before = statSync(addon).mtimeMs
    const r = await run(process.execPath, [buildScript, '--install'], { env: { ...process.env, npm_command: 'exec' } })
    expect(r.stderr).toBe('')
    expect(statSync(addon).mtimeMs).toBe(before)
    expect(build.addonProblem(addon)).toBeUndefined()
    expect(build.addonProblem(join(tmp, 'absent.node'))).toBe('is not built')
  })
})

#!/usr/bin/env node
// The install step (`npm ci`, `npm install`) and `npm run build:native`, in plain Node (no tsx yet).
//
//   node native/build.mjs             build the addon: node-gyp rebuild --directory=native, against the
//                                     headers of the Node that runs this (no download), and link the bin
//   node native/build.mjs --install   what package.json's install script runs: the same, except when npm
//                                     runs it for npx (see below)
//   node native/build.mjs --link-bin  only make node_modules/.bin/pd-bridge
//
// node_modules/.bin/pd-bridge: npm links the bins of dependencies, never the root package's own, so a
// checkout had no local pd-bridge bin. This links it to bin/pd-bridge.mjs (atomically, so two
// installs at once both end with the same link).
//
// npx: `npx pd-bridge` inside the checkout makes npm (libnpmexec's self-execution of a local bin)
// link the checkout into its npx cache the first time, and npm then runs this install script on the
// checkout. That run (npm_command=exec) never builds: it only checks that the addon loads and says so
// when it does not. So npx can no longer start a rebuild of the working tree, or delete native/build
// when one fails.
//
// Node headers: node-gyp downloads them unless told where they are. Node's own install has them at
// <prefix>/include/node (prefix = dirname(dirname(process.execPath))); this passes that directory as
// nodedir, so a clean HOME builds without a download. An npm_config_nodedir that holds headers wins
// (an explicit choice); one that holds none is ignored with a note. When no headers are found here
// and the build fails, one line says what to set.
import { spawnSync } from 'node:child_process'
import { chmodSync, existsSync, lstatSync, mkdirSync, readFileSync, readlinkSync, realpathSync, renameSync, rmSync, statSync, symlinkSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const NATIVE_DIR = dirname(fileURLToPath(import.meta.url))
const ROOT = dirname(NATIVE_DIR)
const BIN_NAME = 'pd-bridge'
const ADDON = join(NATIVE_DIR, 'build', 'Release', 'pdb_kernels.node')

/** EXPECTED_ABI_VERSION as src/kernels/native.ts declares it (read as text: this runs before tsx is usable). */
function expectedAbiVersion () {
  const text = readFileSync(join(ROOT, 'src', 'kernels', 'native.ts'), 'utf8')
  const m = /export const EXPECTED_ABI_VERSION = (\d+)/.exec(text)
  if (m === null) throw new Error('src/kernels/native.ts declares no EXPECTED_ABI_VERSION')
  return Number(m[1])
}

/** True when `dir` holds Node's C headers: an install prefix (include/node/) or a source tree (src/). */
export function hasNodeHeaders (dir) {
  const has = (...p) => existsSync(join(dir, ...p))
  return (has('include', 'node', 'node.h') && has('include', 'node', 'common.gypi')) ||
    (has('src', 'node.h') && has('common.gypi'))
}

/**
 * The nodedir to build against: { dir, source: 'npm_config_nodedir' | 'bundled' } or undefined, and
 * the places looked at (for the message). `execPath` defaults to this Node, `env` to process.env.
 */
export function findNodeHeaders ({ execPath = process.execPath, env = process.env } = {}) {
  const looked = []
  const notes = []
  const configured = env.npm_config_nodedir
  if (configured) {
    looked.push(configured)
    if (hasNodeHeaders(configured)) return { dir: resolve(configured), source: 'npm_config_nodedir', looked, notes }
    notes.push(`npm_config_nodedir=${configured} holds no Node headers (include/node/node.h); ignoring it`)
  }
  const prefixes = [dirname(dirname(execPath))]
  try { prefixes.push(dirname(dirname(realpathSync(execPath)))) } catch {}
  for (const prefix of new Set(prefixes)) {
    looked.push(join(prefix, 'include', 'node'))
    if (hasNodeHeaders(prefix)) return { dir: prefix, source: 'bundled', looked, notes }
  }
  return { dir: undefined, source: undefined, looked, notes }
}

/** The one line printed when the build failed and no headers were found here. */
export function noHeadersMessage (looked, version = process.version) {
  const v = version.replace(/^v/, '')
  return `pd-bridge: the native addon did not build, and no Node headers for node v${v} were found here ` +
    `(looked in ${looked.join(', ')}), so node-gyp had to download them: set npm_config_nodedir to a directory ` +
    `holding include/node/node.h for v${v} (e.g. the unpacked node-v${v}-headers.tar.gz from nodejs.org), ` +
    'or install your Node\'s headers package (Debian/Ubuntu nodejs: libnode-dev), then run npm run build:native'
}

/** The one line printed when the build failed although headers were found. */
export function buildFailedMessage (nodedir) {
  return `pd-bridge: the native addon did not build (node-gyp's output is above; headers from ${nodedir}); ` +
    'it needs g++, make and python3 (docs/install.md), then run npm run build:native'
}

/** node-gyp as npm ships it: npm's own choice, the running npm's, the one next to this Node's npm, then PATH. */
export function findNodeGyp ({ execPath = process.execPath, env = process.env } = {}) {
  const candidates = []
  if (env.npm_config_node_gyp) candidates.push(env.npm_config_node_gyp)
  // npm_execpath is <npm>/bin/npm-cli.js while npm runs a script.
  if (env.npm_execpath) candidates.push(join(dirname(dirname(env.npm_execpath)), 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'))
  const prefix = dirname(dirname(execPath))
  candidates.push(join(prefix, 'lib', 'node_modules', 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'),
    join(dirname(execPath), 'node_modules', 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'))
  for (const p of candidates) {
    if (existsSync(p)) return [process.execPath, p]
  }
  return ['node-gyp']
}

/**
 * node_modules/.bin/pd-bridge -> ../../bin/pd-bridge.mjs (package.json's bin: runtime and proof commands). Idempotent: an existing right link is
 * left alone (no mtime change); anything else there is replaced by a rename, never left half made.
 */
export function linkBin (root = ROOT) {
  const binDir = join(root, 'node_modules', '.bin')
  const link = join(binDir, BIN_NAME)
  const target = relative(binDir, join(root, 'bin', 'pd-bridge.mjs'))
  try {
    if (lstatSync(link).isSymbolicLink() && readlinkSync(link) === target) return link
  } catch {}
  mkdirSync(binDir, { recursive: true })
  const tmp = `${link}.${process.pid}.tmp`
  rmSync(tmp, { force: true })
  symlinkSync(target, tmp)
  renameSync(tmp, link)
  const file = join(root, 'bin', 'pd-bridge.mjs')
  if (existsSync(file) && (statSync(file).mode & 0o111) !== 0o111) chmodSync(file, 0o755)
  return link
}

/** undefined when the built addon loads with the ABI this checkout expects, else why not. */
export function addonProblem (path = ADDON) {
  try {
    const addon = createRequire(import.meta.url)(path)
    const expected = expectedAbiVersion()
    if (addon.abiVersion !== expected) return `has ABI version ${String(addon.abiVersion)}, expected ${expected} (stale build)`
    return undefined
  } catch (err) {
    return err?.code === 'MODULE_NOT_FOUND' ? 'is not built' : `failed to load (${String(err?.message ?? err).split('\n')[0]})`
  }
}

/** node-gyp rebuild --directory=native with the headers found here; the exit status. */
export function build () {
  const found = findNodeHeaders()
  for (const note of found.notes) process.stderr.write(`pd-bridge: ${note}\n`)
  const env = { ...process.env }
  // node-gyp lets npm_config_* in the environment override its command line, so the choice goes there.
  delete env.npm_config_nodedir
  delete env.npm_package_config_node_gyp_nodedir
  // Every object file is independent (three ISA variants of the same kernels plus the addon):
  // make runs one job per core, which is where npm ci spent most of its time.
  const args = ['rebuild', `--directory=${NATIVE_DIR}`, '--jobs=max']
  if (found.dir !== undefined) {
    env.npm_config_nodedir = found.dir
    args.push(`--nodedir=${found.dir}`)
    process.stderr.write(`pd-bridge: building the native addon against the Node headers in ${found.dir}\n`)
  }
  const [cmd, ...pre] = findNodeGyp()
  const r = spawnSync(cmd, [...pre, ...args], { stdio: 'inherit', env, cwd: ROOT })
  if (r.error) {
    process.stderr.write(`pd-bridge: could not run node-gyp (${r.error.message}): run npm run build:native, which brings npm's own node-gyp\n`)
    return 1
  }
  const status = r.status ?? 1
  if (status !== 0) process.stderr.write((found.dir === undefined ? noHeadersMessage(found.looked) : buildFailedMessage(found.dir)) + '\n')
  return status
}

function main (argv) {
  const flags = new Set(argv)
  const unknown = [...flags].filter((f) => !['--install', '--link-bin'].includes(f))
  if (unknown.length > 0) {
    process.stderr.write(`native/build.mjs: unknown option ${unknown[0]} (expected --install or --link-bin)\n`)
    return 2
  }
  // A copy unpacked without node_modules (npm pack, a global install) has no place for the link.
  if (existsSync(join(ROOT, 'node_modules')) || flags.has('--link-bin')) linkBin()
  if (flags.has('--link-bin')) return 0
  if (flags.has('--install') && process.env.npm_command === 'exec') {
    // npx linking this checkout into its cache: never touch native/build from here.
    const problem = addonProblem()
    if (problem !== undefined) process.stderr.write(`pd-bridge: native kernels ${ADDON} ${problem}: run npm run build:native\n`)
    return 0
  }
  return build()
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = main(process.argv.slice(2))
}

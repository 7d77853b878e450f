// What the stack protocols (faults.mjs, adversary.mjs) share: `pd-bridge serve` as a child in a state
// directory of its own, the official openai client as the client, the rule that says whether an
// answer equals the decoder alone's, and a look at the block store. The TypeScript modules are
// imported when first used, so a protocol registers tsx before it calls anything here.
import { spawn } from 'node:child_process'
import { readdir, readFile, stat } from 'node:fs/promises'
import { join } from 'node:path'

/** Environment for children: no PD_* from the shell, then `extra`. */
export function childEnv (extra = {}) {
  const env = {}
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('PD_')) env[k] = v
  return { ...env, ...extra }
}

/** Start `pd-bridge serve --state-dir runDir --port 0`; resolves at its JSON ready line. */
export async function startServe (bin, runDir, env = childEnv()) {
  const child = spawn(process.execPath, [bin, 'serve', '--state-dir', runDir, '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'], env })
  let out = ''
  let err = ''
  child.stderr.on('data', (c) => { err += c.toString() })
  const exited = new Promise((resolve) => child.once('close', (code, signal) => resolve({ code, signal })))
  const ready = await new Promise((resolve, reject) => {
    child.stdout.on('data', (c) => {
      out += c.toString()
      const line = out.split('\n').find((l) => l.startsWith('{"event":"ready"'))
      if (line !== undefined) resolve(JSON.parse(line))
    })
    void exited.then(({ code }) => reject(new Error(`pd-bridge serve exited with ${code} before it was ready:\n${err.slice(-2000)}`)))
  })
  return { child, ready, stderr: () => err, exited }
}

/** Stop a started serve: SIGINT, SIGKILL after 30 s; nothing when it already exited. */
export async function stopServe (serve) {
  if (serve === undefined || serve.child.exitCode !== null || serve.child.signalCode !== null) return
  serve.child.kill('SIGINT')
  const timer = setTimeout(() => serve.child.kill('SIGKILL'), 30_000)
  await serve.exited
  clearTimeout(timer)
}

/** The stack's record (<run>/stack.json): its processes with their pids, URLs. */
export async function stackRecord (runDir) {
  return JSON.parse(await readFile(join(runDir, 'stack.json'), 'utf8'))
}

/** The pid of a stack child, from <run>/stack.json (it follows restarts). */
export async function pidOf (runDir, name) {
  return (await stackRecord(runDir)).processes.find((p) => p.name === name)?.pid
}

/** Whether a process with this pid is alive (signal 0). */
export function alive (pid) {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return e.code === 'EPERM'
  }
}

/**
 * One chat request through the official openai client, greedy unless `extra` says otherwise, token
 * ids returned; what the protocols compare. Never throws: a failure is in `error`.
 */
export async function askChat ({ baseUrl, model, messages, maxTokens, apiKey = 'none', extra = {}, timeoutMs }) {
  const { default: OpenAI } = await import('openai')
  const client = new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey, maxRetries: 0, timeout: timeoutMs })
  const started = performance.now()
  try {
    const { data, response } = await client.chat.completions.create({
      model, messages, max_tokens: maxTokens, temperature: 0, return_token_ids: true, ...extra,
    }).withResponse()
    const choice = data.choices?.[0]
    return {
      ms: performance.now() - started,
      status: response.status,
      tokenIds: Array.isArray(choice?.token_ids) ? choice.token_ids : null,
      finishReason: choice?.finish_reason ?? null,
      cachedTokens: data.usage?.prompt_tokens_details?.cached_tokens ?? 0,
      verdict: data.pd_bridge?.verdict ?? response.headers.get('x-pd-bridge') ?? null,
      bridgedTokens: data.pd_bridge?.bridged_tokens ?? 0,
      error: null,
    }
  } catch (e) {
    const status = typeof e?.status === 'number' ? e.status : null
    const headers = e?.headers
    const header = typeof headers?.get === 'function' ? headers.get('x-pd-bridge') : headers?.['x-pd-bridge']
    return {
      ms: performance.now() - started,
      status,
      tokenIds: null,
      finishReason: null,
      cachedTokens: 0,
      verdict: header ?? (status === null ? `no answer: ${e?.cause?.code ?? e?.name ?? 'error'}: ${e?.message ?? String(e)}` : null),
      bridgedTokens: 0,
      error: status === null ? { message: String(e?.message ?? e) } : { status, type: e?.error?.type ?? null, code: e?.error?.code ?? null, param: e?.error?.param ?? null, message: e?.error?.message ?? e?.message },
    }
  }
}

/** Whether an answer equals the native one: both 200 with the same token ids and finish reason, or the same refusal. */
export function sameAsNative (a, n) {
  if (a.status === 200 && n.status === 200) {
    return a.tokenIds !== null && n.tokenIds !== null && a.finishReason === n.finishReason && a.tokenIds.length === n.tokenIds.length && a.tokenIds.every((t, i) => t === n.tokenIds[i])
  }
  if (a.status === null || n.status === null || a.status !== n.status || a.error === null || n.error === null) return false
  return a.error.message === n.error.message && a.error.code === n.error.code && a.error.param === n.error.param && a.error.type === n.error.type
}

/** A 200 whose tokens differ from the native 200's: the one outcome a bridge must never produce. */
export function wrongAnswer (a, n) {
  return a.status === 200 && n.status === 200 && !sameAsNative(a, n)
}

/** Paths (relative to the quarantine) of every quarantined file of the store at `cacheDir`. */
export async function quarantined (cacheDir) {
  const { QUARANTINE_DIR } = await import('../../src/decode/store/index.ts')
  const out = []
  const walk = async (dir, rel) => {
    let entries
    try {
      entries = await readdir(dir, { withFileTypes: true })
    } catch {
      return
    }
    for (const e of entries) {
      if (e.isDirectory()) await walk(join(dir, e.name), `${rel}${e.name}/`)
      else out.push(`${rel}${e.name}`)
    }
  }
  await walk(join(cacheDir, QUARANTINE_DIR), '')
  return out
}

/** Blocks in the store whose content fails its digest (or cannot be read); temp files; quarantined files. */
export async function storeState (cacheDir) {
  const { listBlockDir, verifyBlockDir } = await import('../../src/decode/store/index.ts')
  let v = { blocks: [], ok: 0, corrupt: 0, unverified: 0, unreadable: 0 }
  try {
    v = await verifyBlockDir(cacheDir)
  } catch { /* no store yet */ }
  let temps = 0
  try {
    temps = (await listBlockDir(cacheDir)).filter((e) => e.kind === 'temp').length
  } catch { /* no store yet */ }
  return { blocks: v.blocks.length, ok: v.ok, corrupt: v.corrupt + v.unverified + v.unreadable, temps, quarantined: await quarantined(cacheDir) }
}

/** How many of `keys` have a block file in the store. */
export async function presentKeys (cacheDir, keys) {
  const { blockPath } = await import('../../src/decode/store/index.ts')
  const present = await Promise.all(keys.map((k) => stat(blockPath(cacheDir, k)).then(() => true, () => false)))
  return present.filter(Boolean).length
}

/** Size of a process's log under <runDir>/logs (0 when there is none yet). */
export async function logSize (runDir, name) {
  try {
    return (await stat(join(runDir, 'logs', `${name}.log`))).size
  } catch {
    return 0
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** Wait until `file` has `text` after byte `from`; polls every 5 ms; false after `ms`. */
export async function waitInLog (file, from, text, ms) {
  const end = Date.now() + ms
  while (Date.now() < end) {
    try {
      if ((await readFile(file, 'utf8')).slice(from).includes(text)) return true
    } catch { /* not yet */ }
    await sleep(5)
  }
  return false
}

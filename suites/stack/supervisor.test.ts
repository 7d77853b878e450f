// The supervisor and its children in process, with small stand-in children (`node -e`): ready
// lines, a child that dies or hangs at start-up (named, with its output's tail), SIGTERM then
// SIGKILL, stop order, deaths after start-up, and the two no-orphan guards: parent-watch.mjs in
// the child, and the supervisor's exit hook.
import { spawn } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'
import { PARENT_WATCH_ENV, StackChild } from '../../src/stack/child.ts'
import { StackError } from '../../src/stack/errors.ts'
import { Supervisor, type SupervisorEvent } from '../../src/stack/supervisor.ts'
import { alive, eventually, tempDir } from './helpers.ts'

const tmp = tempDir('stack-supervisor')
afterAll(() => tmp.remove())

const PARENT_WATCH = pathToFileURL(new URL('../../src/stack/parent-watch.mjs', import.meta.url).pathname).href

/** argv of a stand-in child running `script`. */
function node (script: string): string[] {
  return [process.execPath, '-e', script]
}

const SERVE_FOREVER = 'setInterval(() => {}, 1000);'

describe('a child\'s ready line', () => {
  it('a JSON ready line gives its URL and fields, and lands in the child\'s log as it is', async () => {
    const line = JSON.stringify({ event: 'ready', url: 'http://127.0.0.1:5555', model: 'm' })
    const child = StackChild.spawn({ name: 'json', args: [], logDir: tmp.dir, argv: node(`console.error('loading'); console.log(${JSON.stringify(line)}); ${SERVE_FOREVER}`) })
    const ready = await child.waitReady()
    expect(ready).toEqual({ url: 'http://127.0.0.1:5555', fields: { event: 'ready', url: 'http://127.0.0.1:5555', model: 'm' } })
    await child.stop(2000)
    await child.log.close()
    const records = readFileSync(join(tmp.dir, 'json.log'), 'utf8').trim().split('\n').map((l) => JSON.parse(l))
    expect(records.some((r) => r.msg === 'loading' && r.stream === 'stderr' && r.level === 50)).toBe(true)
    expect(records).toContainEqual({ event: 'ready', url: 'http://127.0.0.1:5555', model: 'm' })
    expect(records.map((r) => r.event).filter((e) => e !== undefined && e !== 'ready')).toEqual(['spawn', 'exit'])
  })

  it('a bare URL line (the share\'s) is a ready line too', async () => {
    const child = StackChild.spawn({ name: 'bare', args: [], logDir: tmp.dir, argv: node(`console.log('http://127.0.0.1:4242'); ${SERVE_FOREVER}`) })
    expect((await child.waitReady()).url).toBe('http://127.0.0.1:4242')
    expect((await child.stop(2000)).signal).toBe('SIGTERM')
  })
})

describe('a child that fails to start', () => {
  it('dying first is a StackError naming it, its exit code and its last 20 lines', async () => {
    const script = 'for (let i = 1; i <= 25; i++) console.error("boom " + i); process.exit(3)'
    const child = StackChild.spawn({ name: 'fake', args: [], logDir: tmp.dir, argv: node(script) })
    const err = await child.waitReady().catch((e: unknown) => e)
    expect(err).toBeInstanceOf(StackError)
    expect((err as StackError).process).toBe('fake')
    const lines = Array.from({ length: 20 }, (_, i) => `  boom ${i + 6}`).join('\n')
    expect((err as Error).message).toBe(`fake exited with code 3 before it was ready; last lines of ${join(tmp.dir, 'fake.log')}:\n${lines}`)
  })

  it('printing nothing says so', async () => {
    const child = StackChild.spawn({ name: 'mute', args: [], logDir: tmp.dir, argv: node('process.exit(1)') })
    await expect(child.waitReady()).rejects.toThrow(`mute exited with code 1 before it was ready (it printed nothing; log: ${join(tmp.dir, 'mute.log')})`)
  })

  it('hanging past the deadline is named, and the child is stopped', async () => {
    const child = StackChild.spawn({ name: 'slow', args: [], logDir: tmp.dir, readyTimeoutMs: 1000, argv: node(`console.error('still loading'); ${SERVE_FOREVER}`) })
    await expect(child.waitReady()).rejects.toThrow(/^slow was not ready within 1 s; last lines of \S+slow\.log:\n {2}still loading$/)
    const exit = await child.exited
    expect(exit.signal).toBe('SIGTERM')
  })
})

describe('stopping', () => {
  it('a child that ignores SIGTERM is killed with SIGKILL after the grace period', async () => {
    const script = `process.on('SIGTERM', () => console.error('ignoring SIGTERM')); console.log('http://127.0.0.1:1'); ${SERVE_FOREVER}`
    const child = StackChild.spawn({ name: 'stubborn', args: [], logDir: tmp.dir, argv: node(script) })
    await child.waitReady()
    const started = Date.now()
    const exit = await child.stop(500)
    expect(exit).toEqual({ code: null, signal: 'SIGKILL' })
    expect(Date.now() - started).toBeGreaterThanOrEqual(450)
    expect(child.log.lastLines()).toContain('ignoring SIGTERM')
  })

  it('stopAll stops the newest child first and each exactly once', async () => {
    const events: SupervisorEvent[] = []
    const sup = new Supervisor({ logDir: tmp.dir, graceMs: 2000, onEvent: (e) => events.push(e) })
    for (const name of ['a', 'b', 'c']) await sup.start({ name, args: [], argv: node(`console.log('http://127.0.0.1:9'); ${SERVE_FOREVER}`) })
    const pids = sup.livePids()
    expect(pids).toHaveLength(3)
    await Promise.all([sup.stopAll(), sup.stopAll()])
    expect(events.filter((e) => e.kind === 'stopped').map((e) => e.name)).toEqual(['c', 'b', 'a'])
    for (const pid of pids) expect(alive(pid)).toBe(false)
    await expect(sup.start({ name: 'late', args: [], argv: node('') })).rejects.toThrow('cannot start late: the stack is stopping')
  })
})

describe('a child that dies after start-up', () => {
  it('is reported once with its exit and tail, also to listeners added after the death', async () => {
    const sup = new Supervisor({ logDir: tmp.dir, graceMs: 1000 })
    await sup.start({ name: 'fragile', args: [], argv: node('console.log("http://127.0.0.1:7"); setTimeout(() => { console.error("out of memory"); process.exit(9) }, 200)') })
    const early: string[] = []
    sup.onDeath((_c, m) => early.push(m))
    expect(await eventually(() => early.length === 1)).toBe(true)
    const late: string[] = []
    sup.onDeath((_c, m) => late.push(m))
    expect(late).toEqual(early)
    expect(early[0]).toMatch(/^fragile \(pid \d+\) exited with code 9 while the stack was running; last lines of \S+fragile\.log:\n {2}http:\/\/127\.0\.0\.1:7\n {2}out of memory$/)
    await sup.stopAll()
  })

  it('a child stopped on purpose is not a death', async () => {
    const sup = new Supervisor({ logDir: tmp.dir, graceMs: 1000 })
    const deaths: string[] = []
    sup.onDeath((_c, m) => deaths.push(m))
    await sup.start({ name: 'calm', args: [], argv: node(`console.log('http://127.0.0.1:8'); ${SERVE_FOREVER}`) })
    await sup.stopAll()
    await new Promise((r) => setTimeout(r, 100))
    expect(deaths).toEqual([])
  })
})

describe('no orphans', () => {
  it('parent-watch.mjs stops a child whose supervisor was SIGKILLed; a child without it, or without the stack\'s marker, lives on', async () => {
    // A stand-in supervisor: three children in their own process groups with IPC channels: the
    // watcher preloaded with the stack's marker (a stack child), without it (a process a child
    // forks with its --import, as node-llama-cpp does to test its binary: not the supervisor's
    // channel), and no watcher at all. It prints their pids and waits.
    const child = (watch: boolean, marked: boolean): string => `spawn(process.execPath, [${watch ? `'--import', ${JSON.stringify(PARENT_WATCH)}, ` : ''}'-e', 'setInterval(() => {}, 1000)'], { stdio: ['ignore', 'ignore', 'ignore', 'ipc'], detached: true, env: { ...process.env, ${marked ? `${PARENT_WATCH_ENV}: '1'` : ''} } })`
    const script = `const { spawn } = require('node:child_process'); const a = ${child(true, true)}; const b = ${child(false, false)}; const c = ${child(true, false)}; console.log(a.pid + ' ' + b.pid + ' ' + c.pid); setInterval(() => {}, 1000)`
    const parent = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, [PARENT_WATCH_ENV]: '' } })
    const pids = await new Promise<number[]>((resolve) => parent.stdout.once('data', (d: Buffer) => resolve(d.toString().trim().split(' ').map(Number))))
    const [watched, unwatched, unmarked] = pids
    try {
      expect(alive(watched) && alive(unwatched) && alive(unmarked)).toBe(true)
      parent.kill('SIGKILL')
      expect(await eventually(() => !alive(watched))).toBe(true)
      await new Promise((r) => setTimeout(r, 300))
      expect(alive(unwatched)).toBe(true)
      expect(alive(unmarked)).toBe(true)
    }
    finally {
      for (const pid of pids) if (alive(pid)) process.kill(pid, 'SIGKILL')
    }
  })

  it('the supervisor\'s exit hook kills its children when its process exits on an uncaught error', async () => {
    const supervisorUrl = pathToFileURL(new URL('../../src/stack/supervisor.ts', import.meta.url).pathname).href
    const script = join(tmp.dir, 'crashing-supervisor.mts')
    // The child has no parent-watch here (argv replaced), so only the exit hook can stop it.
    writeFileSync(script, [
      `import { Supervisor } from ${JSON.stringify(supervisorUrl)}`,
      `const sup = new Supervisor({ logDir: ${JSON.stringify(tmp.dir)} })`,
      `await sup.start({ name: 'orphan', args: [], argv: [process.execPath, '-e', "console.log('http://127.0.0.1:3'); setInterval(() => {}, 1000)"] })`,
      'console.log(sup.livePids()[0])',
      "setTimeout(() => { throw new Error('crash') }, 50)",
    ].join('\n'))
    const proc = spawn(process.execPath, ['--import', 'tsx', script], { stdio: ['ignore', 'pipe', 'pipe'], cwd: process.cwd() })
    let stderr = ''
    proc.stderr.on('data', (d: Buffer) => { stderr += d.toString() })
    const pid = await new Promise<number>((resolve, reject) => {
      proc.stdout.once('data', (d: Buffer) => resolve(Number(d.toString().trim())))
      proc.once('close', () => reject(new Error(`the stand-in supervisor ended before printing its child's pid:\n${stderr}`)))
    })
    const code = await new Promise<number | null>((resolve) => proc.once('close', resolve))
    expect(code).toBe(1)
    expect(stderr).toContain('Error: crash')
    expect(await eventually(() => !alive(pid))).toBe(true)
  })
})

// The command line's first contact: --version, and usage mistakes answered in one line (exit 2)
// instead of the whole help. The real CLI, as a child process.
import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'
import { usageLine } from '../../src/cli/main.ts'

const run = promisify(execFile)
const bin = new URL('../../bin/pd-bridge.mjs', import.meta.url).pathname
const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }

interface Result { code: number, stdout: string, stderr: string }

async function cli (...args: string[]): Promise<Result> {
  return await cliOf(bin, ...args)
}

/** `pd-bridge --help`, run once for the tests that read it: each start of the CLI costs seconds on a loaded machine. */
let helpRun: Promise<Result> | undefined
async function helpOutput (): Promise<Result> {
  helpRun ??= cli('--help')
  return await helpRun
}

async function cliOf (entry: string, ...args: string[]): Promise<Result> {
  try {
    const { stdout, stderr } = await run(process.execPath, [entry, ...args], { maxBuffer: 1 << 22 })
    return { code: 0, stdout, stderr }
  }
  catch (err) {
    const e = err as { code: number, stdout: string, stderr: string }
    return { code: e.code, stdout: e.stdout, stderr: e.stderr }
  }
}

describe('pd-bridge --version', () => {
  it('--version and -V print the version in package.json, exit 0', async () => {
    for (const flag of ['--version', '-V']) {
      expect(await cli(flag)).toEqual({ code: 0, stdout: `${pkg.version}\n`, stderr: '' })
    }
  })
})

describe('usage errors: one line, exit 2', () => {
  it('an unknown command names the nearest one and --help', async () => {
    expect(await cli('doctr')).toEqual({
      code: 2, stdout: '', stderr: "pd-bridge: unknown command 'doctr' (did you mean 'doctor'?); see pd-bridge --help\n",
    })
  })

  it('an unknown command with no near neighbour: still one line', async () => {
    expect(await cli('zzzzzzzz')).toEqual({ code: 2, stdout: '', stderr: "pd-bridge: unknown command 'zzzzzzzz'; see pd-bridge --help\n" })
  })

  it('an unknown option of the program', async () => {
    expect(await cli('--verison')).toEqual({
      code: 2, stdout: '', stderr: "pd-bridge: unknown option '--verison' (did you mean '--version'?); see pd-bridge --help\n",
    })
  })

  it('an unknown option of a command names the command, and the command does not run', async () => {
    expect(await cli('demo', '--tokns', '5')).toEqual({
      code: 2, stdout: '', stderr: "pd-bridge demo: unknown option '--tokns' (did you mean '--tokens'?); see pd-bridge demo --help\n",
    })
  })

  it('a missing option value or argument', async () => {
    expect(await cli('demo', '--tokens')).toEqual({
      code: 2, stdout: '', stderr: "pd-bridge demo: option '--tokens <n>' argument missing; see pd-bridge demo --help\n",
    })
    const r = await cli('verify-blocks')
    expect(r.code).toBe(2)
    expect(r.stderr).toBe("pd-bridge verify-blocks: missing required argument 'dirA'; see pd-bridge verify-blocks --help\n")
  })

  it('several suggestions are all quoted', () => {
    expect(usageLine("error: unknown option '--max'\n(Did you mean one of --max-tokens, --max-queue?)\n", 'pd-bridge decoder'))
      .toBe("pd-bridge decoder: unknown option '--max' (did you mean one of '--max-tokens', '--max-queue'?); see pd-bridge decoder --help")
  })
})

describe('pd-bridge --help', () => {
  it('still prints every command and its options, exit 0', async () => {
    const r = await helpOutput()
    expect(r.code).toBe(0)
    expect(r.stdout).toContain('-V, --version')
    for (const name of ['serve', 'demo', 'doctor']) expect(r.stdout).toContain(`Usage: pd-bridge ${name} [options]`)
  })

  it('no option states its default twice', async () => {
    const { stdout } = await helpOutput()
    // One option's help: its flag line and the continuation lines indented under it.
    const options: string[] = []
    for (const line of stdout.split('\n')) {
      if (/^ {2}-/.test(line)) options.push(line)
      else if (/^ {6,}\S/.test(line) && options.length > 0) options[options.length - 1] += ' ' + line.trim()
    }
    expect(options.length).toBeGreaterThan(50)
    expect(options.filter((o) => (o.match(/\(default/g) ?? []).length > 1)).toEqual([])
  })
})

describe('the two entries: bin/pd-bridge.mjs and the deployment entry src/cli/pd-bridge.mjs', () => {
  const deployment = new URL('../../src/cli/pd-bridge.mjs', import.meta.url).pathname
  const commandsIn = (help: string): string[] => [...help.matchAll(/^Usage: pd-bridge (\S+) /gm)].map((m) => m[1])

  it('the bin places the proof commands among the runtime ones: gate after doctor, results last', async () => {
    const full = commandsIn((await helpOutput()).stdout)
    const runtime = commandsIn((await cliOf(deployment, '--help')).stdout)
    expect(runtime).not.toContain('gate')
    expect(runtime).not.toContain('results')
    expect(full.filter((c) => c !== 'gate' && c !== 'results')).toEqual(runtime)
    expect(full.indexOf('gate')).toBe(full.indexOf('doctor') + 1)
    expect(full.at(-1)).toBe('results')
  })

  it('the deployment entry knows no proof command', async () => {
    expect(await cliOf(deployment, 'gate')).toEqual({ code: 2, stdout: '', stderr: "pd-bridge: unknown command 'gate'; see pd-bridge --help\n" })
  })
})

// The pd-bridge command line: one commander program, each command in its own module. This file knows
// the runtime commands only; a composition root (bin/pd-bridge.mjs) hands in the proof commands of
// verify/cli as placements, so src/ never imports verify/.
import { readFileSync } from 'node:fs'
import { Command, CommanderError } from 'commander'
import { PdBridgeError } from '../errors.ts'
import { runtimeCommands } from './commands/index.ts'

/** The version in package.json. */
export const VERSION: string = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version

/** "pd-bridge" or "pd-bridge demo": the command line that reached `cmd`. */
function commandPath (cmd: Command): string {
  const names: string[] = []
  for (let c: Command | null = cmd; c !== null; c = c.parent) names.unshift(c.name())
  return names.join(' ')
}

/**
 * Commander's usage error (`error: unknown command 'foo'\n(Did you mean doctor?)`) as one line:
 * `pd-bridge: unknown command 'foo' (did you mean 'doctor'?); see pd-bridge --help`.
 */
export function usageLine (message: string, path: string): string {
  const [first, ...rest] = message.trim().replace(/^error: /, '').split('\n')
  const hint = /^\(Did you mean (one of )?(.+)\?\)$/.exec(rest.join(' ').trim())
  const quote = (s: string): string => /^'.*'$/.test(s) ? s : `'${s}'`
  const suggestion = hint === null ? '' : ` (did you mean ${hint[1] ?? ''}${hint[2].split(', ').map(quote).join(', ')}?)`
  return `${path}: ${first.replace(/\.$/, '')}${suggestion}; see ${path} --help`
}

/** Usage errors of `cmd` and every command under it: one line and exit 2, never the whole help. */
function oneLineUsageErrors (cmd: Command): void {
  cmd.configureOutput({ outputError: (str, write) => { write(usageLine(str, commandPath(cmd)) + '\n') } })
  cmd.exitOverride()
  for (const sub of cmd.commands) oneLineUsageErrors(sub)
}

/** A command added from outside src/: it goes right after the command named `after` (at the end without one). */
export interface CommandPlacement {
  command: Command
  after?: string
}

/** The runtime commands with each placement put in its place, in --help's order. */
export function placeCommands (placements: readonly CommandPlacement[]): Command[] {
  const commands = [...runtimeCommands]
  for (const { command, after } of placements) {
    const i = after === undefined ? commands.length - 1 : commands.findIndex((c) => c.name() === after)
    if (i < 0) throw new Error(`cannot place command ${command.name()}: no command ${after} to put it after`)
    commands.splice(i + 1, 0, command)
  }
  return commands
}

/** The pd-bridge program: the runtime commands, plus any placed from outside src/ (bin/pd-bridge.mjs). */
export function buildProgram (placements: readonly CommandPlacement[] = []): Command {
  const commands = placeCommands(placements)
  const program = new Command('pd-bridge')
    .description('Heterogeneous prefill/decode bridge for DeepSeek-V4 models')
    .version(VERSION, '-V, --version', 'print the version of pd-bridge')
  // Commander's default help lists command names only; show each command's options too.
  program.addHelpText('after', () => '\n' + commands.map((c) => c.helpInformation()).join('\n'))
  for (const command of commands) program.addCommand(command)
  oneLineUsageErrors(program)
  return program
}

/** System failures a user causes (a wrong path, a permission, a busy port) deserve a sentence, not a stack. */
const USER_SYSTEM_ERRORS: Record<string, string> = {
  ENOENT: 'no such file or directory',
  EACCES: 'permission denied',
  EISDIR: 'is a directory, expected a file',
  ENOTDIR: 'not a directory',
  EADDRINUSE: 'address already in use (another process listens there; pick another --port)',
  EADDRNOTAVAIL: 'address not available on this machine',
}

function userMessage (err: unknown): string | undefined {
  if (err instanceof PdBridgeError) return err.message
  const e = err as NodeJS.ErrnoException & { address?: string, port?: number }
  if (!e || typeof e.code !== 'string' || !(e.code in USER_SYSTEM_ERRORS)) return undefined
  const where = e.path ?? (e.address !== undefined ? `${e.address}:${e.port ?? ''}` : '')
  return `${where}: ${USER_SYSTEM_ERRORS[e.code]}`
}

export async function main (argv: string[], placements: readonly CommandPlacement[] = []): Promise<void> {
  // `pd-bridge inspect ... | head` closes the pipe early; that is not an error.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(0)
    throw err
  })
  try {
    await buildProgram(placements).parseAsync(argv)
  }
  catch (err) {
    // exitOverride: help and --version end here with exit code 0, usage errors (already printed) with 1.
    if (err instanceof CommanderError) {
      process.exitCode = err.exitCode === 0 ? 0 : 2
      return
    }
    const message = userMessage(err)
    if (message === undefined) throw err
    process.stderr.write(`pd-bridge: ${message}\n`)
    process.exitCode = 2
  }
}

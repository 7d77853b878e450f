// The pd-bridge command line: one commander program, each command in its own module.
import { Command } from 'commander'
import { PdBridgeError } from '../errors.ts'
import { commands } from './commands/index.ts'

export function buildProgram (): Command {
  const program = new Command('pd-bridge')
    .description('Heterogeneous prefill/decode bridge for DeepSeek-V4 models')
    .showHelpAfterError()
  // Commander's default help lists command names only; show each command's options too.
  program.addHelpText('after', () => '\n' + commands.map((c) => c.helpInformation()).join('\n'))
  for (const command of commands) program.addCommand(command)
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

export async function main (argv: string[]): Promise<void> {
  // `pd-bridge inspect ... | head` closes the pipe early; that is not an error.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(0)
    throw err
  })
  try {
    await buildProgram().parseAsync(argv)
  }
  catch (err) {
    const message = userMessage(err)
    if (message === undefined) throw err
    process.stderr.write(`pd-bridge: ${message}\n`)
    process.exitCode = 2
  }
}

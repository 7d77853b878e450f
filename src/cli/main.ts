// The pd-bridge command line: one commander program, each command in its own module.
import { Command } from 'commander'
import { PdBridgeError } from '../errors.ts'
import { commands } from './commands/index.ts'

export function buildProgram (): Command {
  const program = new Command('pd-bridge')
    .description('Heterogeneous prefill/decode bridge for DeepSeek-V4 models')
    .showHelpAfterError()
  // Commander's default help lists command names only; show each command's options too.
  program.configureHelp({ showGlobalOptions: true })
  program.addHelpText('after', () => '\n' + commands.map((c) => c.helpInformation()).join('\n'))
  for (const command of commands) program.addCommand(command)
  return program
}

export async function main (argv: string[]): Promise<void> {
  try {
    await buildProgram().parseAsync(argv)
  }
  catch (err) {
    if (err instanceof PdBridgeError) {
      process.stderr.write(`pd-bridge: ${err.message}\n`)
      process.exitCode = 2
      return
    }
    throw err
  }
}

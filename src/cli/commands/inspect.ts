// `pd-bridge inspect`: validate a safetensors file or checkpoint directory and list what it holds.
import { stat } from 'node:fs/promises'
import { Command } from 'commander'
import { SafetensorsFile, ShardedCheckpoint } from '../../formats/safetensors/index.ts'

function describeShape (shape: number[]): string {
  return `[${shape.join(', ')}]`
}

async function inspectFile (path: string, out: NodeJS.WritableStream): Promise<void> {
  const file = await SafetensorsFile.open(path)
  try {
    out.write(`${path}: ${file.tensors.size} tensors, data starts at byte ${file.dataStart}\n`)
    for (const [key, value] of Object.entries(file.metadata)) out.write(`  metadata ${key} = ${value}\n`)
    for (const info of file.tensors.values()) {
      out.write(`  ${info.name}  ${info.dtype} ${describeShape(info.shape)}  bytes ${info.begin}..${info.end}\n`)
    }
  }
  finally {
    await file.close()
  }
}

async function inspectDirectory (dir: string, out: NodeJS.WritableStream): Promise<void> {
  const ckpt = await ShardedCheckpoint.open(dir)
  try {
    const names = ckpt.names()
    out.write(`${dir}: ${names.length} tensors\n`)
    for (const name of names) {
      const info = ckpt.info(name)
      out.write(`  ${name}  ${info.dtype} ${describeShape(info.shape)}  ${info.file}\n`)
    }
  }
  finally {
    await ckpt.close()
  }
}

/** The inspect command: every header rule is checked on open, so a broken file reports what is wrong. */
export const inspectCommand = new Command('inspect')
  .description('validate a .safetensors file or a checkpoint directory (single file or sharded) and list its tensors')
  .argument('<path>', 'a .safetensors file, or a directory with model.safetensors or model.safetensors.index.json')
  .action(async (path: string) => {
    const isDir = (await stat(path)).isDirectory()
    await (isDir ? inspectDirectory(path, process.stdout) : inspectFile(path, process.stdout))
  })

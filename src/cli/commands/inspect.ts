// `pd-bridge inspect`: validate a safetensors file or checkpoint directory and say what it holds.
// For a DeepSeek-V4 checkpoint: which naming and weight formats it uses, its parameter count and
// its cache geometry (what the decoder's cache and a bridge capture cost per token and per block).
import { readFileSync } from 'node:fs'
import { open, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { Command } from 'commander'
import { cacheGeometry } from '../../capture/index.ts'
import { DEFAULT_BLOCK_SIZE, parseBlockSize } from '../../config/block-size.ts'
import { PdBridgeError } from '../../errors.ts'
import { readGgufHeader, type GgufValue } from '../../formats/gguf/index.ts'
import { SafetensorsFile, ShardedCheckpoint } from '../../formats/safetensors/index.ts'
import { describeCheckpoint, namingLabel, type CheckpointSource } from '../../model/checkpoint/index.ts'
import { parseDeepseekV4Config, type DeepseekV4Config } from '../../model/config.ts'

/** Built-in geometries: config.json files as transformers writes them (src/model/config/*.json). */
const GEOMETRIES: Record<string, { file: string, what: string }> = {
  'v4-flash': { file: 'v4-flash-config.json', what: "DeepSeek-V4-Flash's architecture: transformers 5.17's DeepseekV4Config() saved as config.json" },
}

function describeShape (shape: number[]): string {
  return `[${shape.join(', ')}]`
}

const int = (n: number) => Math.round(n).toLocaleString('en-US')
const bytes = (n: number) => n >= 1 << 20 ? `${int(n)} B (${(n / (1 << 20)).toFixed(1)} MiB)` : `${int(n)} B`

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

/** Whether the file starts with GGUF's magic. */
async function isGguf (path: string): Promise<boolean> {
  const handle = await open(path, 'r')
  try {
    const head = new Uint8Array(4)
    const { bytesRead } = await handle.read(head, 0, 4, 0)
    return bytesRead === 4 && String.fromCharCode(...head) === 'GGUF'
  }
  finally {
    await handle.close()
  }
}

// One metadata value on one line: strings quoted (long ones cut), arrays by type and count with their first items.
function describeGgufValue (v: GgufValue): string {
  const show = (x: unknown) => {
    if (typeof x === 'string') return JSON.stringify(x.length > 80 ? `${x.slice(0, 77)}...` : x)
    return String(x)
  }
  if (v.type !== 'ARRAY') return `${show(v.value)} (${v.type})`
  const items = (v.value as unknown[]).slice(0, 8).map(show).join(', ')
  return `[${items}${v.value.length > 8 ? ', ...' : ''}] (ARRAY of ${v.value.length} ${v.itemType})`
}

async function inspectGguf (path: string, out: NodeJS.WritableStream): Promise<void> {
  const h = await readGgufHeader(path)
  out.write(`${path}: GGUF v${h.version}, ${h.tensors.length} tensors, ${h.metadata.size} metadata keys, data starts at byte ${h.dataStart} (alignment ${h.alignment})\n`)
  for (const [key, value] of h.metadata) out.write(`  metadata ${key} = ${describeGgufValue(value)}\n`)
  for (const t of h.tensors) out.write(`  ${t.name}  ${t.type} [${t.dims.join(', ')}]  bytes ${t.start}..${t.start + t.bytes}\n`)
}

async function listTensors (dir: string, out: NodeJS.WritableStream): Promise<void> {
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

function writeSource (source: CheckpointSource, parameters: number, out: NodeJS.WritableStream): void {
  const formats = Object.entries(source.formats).sort(([, a], [, b]) => b - a).map(([f, n]) => `${f} ${n}`).join(', ')
  out.write(`  naming           ${source.naming}: ${namingLabel(source.naming)} names${source.hubSpelling ? ", the hub's original spellings" : ''}\n`)
  out.write(`  experts          ${source.perExpert ? 'one tensor per expert and projection' : 'stacked (gate_up_proj, down_proj)'}\n`)
  out.write(`  weight formats   ${formats} (file tensors; fp8 weights counted with their block scale)\n`)
  out.write(`  parameters       ${int(parameters)}${source.ignored.length > 0 ? ` (${source.ignored.length} mtp.* tensors ignored, as transformers does)` : ''}\n`)
}

function writeGeometry (cfg: DeepseekV4Config, blockSize: number, out: NodeJS.WritableStream): void {
  const g = cacheGeometry(cfg, { bytesPerValue: 2, blockSize })
  out.write(`  layers           ${cfg.numHiddenLayers}: ${g.layers.sliding} sliding, ${g.layers.csa} compressed-sparse (ratio ${cfg.compressRates.csa}), ${g.layers.hca} heavily-compressed (ratio ${cfg.compressRates.hca}); window ${cfg.slidingWindow}\n`)
  out.write(`  cache geometry   the decoder's cache in bf16, blocks of ${int(blockSize)} tokens:\n`)
  out.write(`    pooled cache   ${bytes(g.pooledBytesPerToken)} per token, ${bytes(g.pooledBytesPerBlock)} per block\n`)
  out.write(`    fixed          ${bytes(g.fixedBytes)} (windows of ${cfg.slidingWindow - 1} rows and the ratio-${cfg.compressRates.csa} carries, whatever the length)\n`)
  out.write(`    capture memory ${bytes(g.captureBytesPerToken)} per token + ${bytes(g.captureFixedBytes)} (float32 while held, with one boundary snapshot per layer and block)\n`)
}

/** The inspect command: every header rule is checked on open, so a broken file reports what is wrong. */
export const inspectCommand = new Command('inspect')
  .description('validate a .safetensors or .gguf file or a checkpoint directory and list its tensors (a GGUF: its metadata and tensor table, dims in ggml order); for a DeepSeek-V4 checkpoint, its naming, weight formats, parameter count and cache geometry')
  .argument('[path]', 'a .safetensors or .gguf file, or a directory with model.safetensors or model.safetensors.index.json')
  .option('--geometry <name>', `a built-in architecture instead of a path: ${Object.keys(GEOMETRIES).join(', ')}`)
  .option('--block-size <n>', `decoder block size in tokens for the per-block figures (default ${DEFAULT_BLOCK_SIZE})`)
  .action(async (path: string | undefined, opts: { geometry?: string, blockSize?: string }) => {
    const blockSize = opts.blockSize === undefined ? DEFAULT_BLOCK_SIZE : parseBlockSize(opts.blockSize)
    const out = process.stdout
    if (opts.geometry !== undefined) {
      if (path !== undefined) throw new PdBridgeError('give a path or --geometry, not both')
      const known = GEOMETRIES[opts.geometry]
      if (known === undefined) throw new PdBridgeError(`--geometry: unknown ${JSON.stringify(opts.geometry)}, expected one of ${Object.keys(GEOMETRIES).join(', ')}`)
      const file = new URL(`../../model/config/${known.file}`, import.meta.url).pathname
      const cfg = parseDeepseekV4Config(JSON.parse(readFileSync(file, 'utf8')), file)
      out.write(`geometry ${opts.geometry}: ${known.what}\n`)
      writeGeometry(cfg, blockSize, out)
      return
    }
    if (path === undefined) throw new PdBridgeError('inspect needs a path (a .safetensors file or a checkpoint directory) or --geometry NAME')
    if (!(await stat(path)).isDirectory()) {
      if (await isGguf(path)) await inspectGguf(path, out)
      else await inspectFile(path, out)
      return
    }
    const isModel = await stat(join(path, 'config.json')).then((s) => s.isFile(), () => false)
    if (isModel) {
      const { config, source, parameters } = await describeCheckpoint(path)
      out.write(`${path}: DeepSeek-V4 checkpoint\n`)
      writeSource(source, parameters, out)
      writeGeometry(config, blockSize, out)
    }
    await listTensors(path, out)
  })

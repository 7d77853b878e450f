// `pd-bridge pool`: the capture hook alone, on attention inputs from a file. Input: a safetensors
// file with `oneshot.layers.{i}.attn_input` [T, hidden] (F32 or BF16), as `dump` and
// harness/hf_reference.py write them. Output: every cache tensor under `oneshot.layers.{i}.*`,
// the names `dump` uses (ModelCache.tensors('oneshot')), F32 and I64.
import { stat } from 'node:fs/promises'
import { Command } from 'commander'
import { PdBridgeError } from '../../errors.ts'
import { loadSidecar, PoolingHook } from '../../capture/index.ts'
import { SafetensorsFile, tensorFrom, viewAs, writeSafetensors, type Tensor } from '../../formats/safetensors/index.ts'
import { decodeBf16 } from '../../numerics/bf16.ts'

async function exists (path: string): Promise<boolean> {
  try {
    await stat(path)
    return true
  }
  catch {
    return false
  }
}

/** Every layer's attention inputs from `path`, checked against the sidecar's layer count and hidden size. */
export async function readAttentionInputs (path: string, layers: number, hidden: number): Promise<{ rows: Float32Array[], tokens: number }> {
  const file = await SafetensorsFile.open(path)
  try {
    const rows: Float32Array[] = []
    let tokens = -1
    for (let i = 0; i < layers; i++) {
      const name = `oneshot.layers.${i}.attn_input`
      if (!file.tensors.has(name)) throw new PdBridgeError(`${path}: no tensor ${name} (the sidecar has ${layers} layers)`)
      const t = await file.read(name)
      if (t.shape.length !== 2 || t.shape[1] !== hidden) throw new PdBridgeError(`${path}: ${name} has shape [${t.shape.join(', ')}], expected [T, ${hidden}] (the sidecar's hidden size)`)
      if (tokens === -1) tokens = t.shape[0]
      if (t.shape[0] !== tokens) throw new PdBridgeError(`${path}: ${name} has ${t.shape[0]} rows but layer 0 has ${tokens}`)
      if (t.dtype === 'F32') rows.push(viewAs(t, 'F32'))
      else if (t.dtype === 'BF16') rows.push(decodeBf16(viewAs(t, 'BF16')))
      else throw new PdBridgeError(`${path}: ${name} is ${t.dtype}, expected F32 or BF16`)
    }
    if (tokens < 1) throw new PdBridgeError(`${path}: the attention inputs hold no tokens`)
    return { rows, tokens }
  }
  finally {
    await file.close()
  }
}

/** The pool command. */
export const poolCommand = new Command('pool')
  .description('run the capture hook alone: attention inputs from a file, the decoder\'s caches (from a sidecar) out, under dump\'s oneshot.layers.{i}.* names')
  .requiredOption('--sidecar <dir>', 'sidecar directory made by export-weights')
  .requiredOption('--attn-inputs <file>', 'safetensors file with oneshot.layers.{i}.attn_input [T, hidden] (F32 or BF16)')
  .requiredOption('--out <file>', 'the .safetensors file to write')
  .option('--chunk <n>', 'feed the hook N tokens at a time per layer (default: all at once); the result does not depend on it')
  .option('--force', 'replace --out if it exists')
  .action(async (opts: { sidecar: string, attnInputs: string, out: string, chunk?: string, force?: boolean }) => {
    const started = performance.now()
    let chunk: number | undefined
    if (opts.chunk !== undefined) {
      if (!/^\d+$/.test(opts.chunk) || !Number.isSafeInteger(Number(opts.chunk)) || Number(opts.chunk) < 1) {
        throw new PdBridgeError(`--chunk must be a positive integer, got ${JSON.stringify(opts.chunk)}`)
      }
      chunk = Number(opts.chunk)
    }
    if (opts.force !== true && await exists(opts.out)) throw new PdBridgeError(`${opts.out} already exists (use --force to replace it)`)
    const sidecar = await loadSidecar(opts.sidecar)
    const hidden = sidecar.hiddenSize
    const { rows, tokens } = await readAttentionInputs(opts.attnInputs, sidecar.numLayers, hidden)
    const hook = new PoolingHook(sidecar.kvPath)
    const step = chunk ?? tokens
    for (let c0 = 0; c0 < tokens; c0 += step) {
      const c1 = Math.min(tokens, c0 + step)
      rows.forEach((x, layer) => hook.feed(layer, c0, x.subarray(c0 * hidden, c1 * hidden), c1 - c0))
    }
    const out = new Map<string, Tensor>()
    for (const [name, t] of hook.tensors('oneshot')) out.set(name, t.dtype === 'I64' ? tensorFrom('I64', t.shape, t.data) : tensorFrom('F32', t.shape, t.data))
    await writeSafetensors(opts.out, out, {
      producer: 'pd-bridge pool', sidecar_fingerprint: sidecar.fingerprint, profile: sidecar.profile.name, tokens: String(tokens), chunk: String(step),
    })
    const seconds = (performance.now() - started) / 1000
    process.stdout.write(`wrote ${opts.out}: ${out.size} tensors, T=${tokens}, ${sidecar.numLayers} layers, chunk ${step}, profile ${sidecar.profile.name}, ${seconds.toFixed(1)} s\n`)
  })

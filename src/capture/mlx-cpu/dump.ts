// `dump --profile mlx-cpu`: the dump of src/model/dump.ts with every cache tensor computed by the
// mlx-cpu cache math (MLX's CPU arithmetic, oMLX's cache) from the layers' attention inputs, fed
// through the capture hook exactly as the product's prefill side feeds it. The forward pass (the
// attention inputs, logits, greedy tokens) is the `decoder` profile's: MLX's whole-model arithmetic
// (OpenBLAS sgemm in the hyper-connections) is not reproduced, only its cache path.
import { tensorFrom, type Tensor } from '../../formats/safetensors/index.ts'
import { checkpointDigest, loadCheckpoint } from '../../model/checkpoint/index.ts'
import type { DeepseekV4Config } from '../../model/config.ts'
import { type DumpCheckpointOptions, type ModelDump, DUMP_PRODUCER, dumpEngine } from '../../model/dump.ts'
import { DeepseekV4Engine } from '../../model/engine/index.ts'
import { getProfile, profileFingerprint } from '../../model/profiles/index.ts'
import { MLX_CPU } from '../../numerics/mlx-cpu/rounding-points.ts'
import { PoolingHook } from '../hook.ts'
import type { KvPathModel } from '../kv-path.ts'
import { mlxCpuCacheConfig } from './config.ts'
import { mlxCpuCacheWeightsFromCheckpoint } from './from-checkpoint.ts'
import { MlxCpuKvLayer } from './kv-layer.ts'
import type { MlxCpuCacheWeights } from './weights.ts'

/** The `--profile` name that selects this dump. */
export const MLX_CPU_DUMP_PROFILE = 'mlx-cpu'
/** The profile whose forward pass gives the attention inputs, logits and greedy tokens. */
export const MLX_CPU_DUMP_FORWARD = 'decoder'

/** The capture's kv path with MLX's arithmetic over a checkpoint's config and built weights. */
export function mlxCpuKvPathOf (cfg: DeepseekV4Config, weights: MlxCpuCacheWeights): KvPathModel {
  const mcfg = mlxCpuCacheConfig(cfg, MLX_CPU)
  const layers = cfg.layerTypes.map((type, i) => new MlxCpuKvLayer(weights.layers[i], mcfg, i, type, cfg))
  return { profile: getProfile(MLX_CPU_DUMP_FORWARD), layers, hiddenSize: cfg.hiddenSize, maxPositionEmbeddings: cfg.maxPositionEmbeddings }
}

/** Feed each layer's attention inputs [T, hidden] in the given chunks; returns the cache tensors under `prefix`. */
function cacheTensors (kv: KvPathModel, inputs: Float32Array[], T: number, cuts: number[], prefix: string): Map<string, Tensor> {
  const hook = new PoolingHook(kv)
  const h = kv.hiddenSize
  inputs.forEach((x, layer) => {
    let at = 0
    for (const end of [...cuts, T]) {
      hook.feed(layer, at, x.subarray(at * h, end * h), end - at)
      at = end
    }
  })
  const out = new Map<string, Tensor>()
  for (const [name, t] of hook.tensors(prefix)) out.set(name, t.dtype === 'F32' ? tensorFrom('F32', t.shape, t.data) : tensorFrom('I64', t.shape, t.data))
  return out
}

function attnInputsOf (tensors: Map<string, Tensor>, prefix: string, layers: number): Float32Array[] {
  return Array.from({ length: layers }, (_, i) => {
    const t = tensors.get(`${prefix}.layers.${i}.attn_input`)
    if (t === undefined) throw new Error(`mlx-cpu dump: no ${prefix} attention input of layer ${i}`)
    return new Float32Array(t.data.buffer.slice(t.data.byteOffset, t.data.byteOffset + t.data.byteLength))
  })
}

/** Replace every `${prefix}.layers.*` cache tensor of `out` with `caches`. */
function replaceCaches (out: Map<string, Tensor>, prefix: string, caches: Map<string, Tensor>): void {
  for (const name of [...out.keys()]) {
    if (name.startsWith(`${prefix}.layers.`) && !name.endsWith('.attn_input')) out.delete(name)
  }
  for (const [name, t] of caches) out.set(name, t)
}

/** The dump with MLX's cache arithmetic (see the file comment); metadata as dumpCheckpoint's plus cache_math and forward_profile. */
export async function dumpCheckpointMlxCpu (opts: DumpCheckpointOptions): Promise<ModelDump> {
  const forward = getProfile(MLX_CPU_DUMP_FORWARD)
  const ckpt = await loadCheckpoint(opts.model)
  const engine = DeepseekV4Engine.fromCheckpoint(ckpt, forward)
  const kv = mlxCpuKvPathOf(ckpt.config, mlxCpuCacheWeightsFromCheckpoint(ckpt))
  const tensors = dumpEngine(engine, { ...opts, attnInputs: true })
  const T = opts.tokens.length
  const layers = ckpt.config.numHiddenLayers
  replaceCaches(tensors, 'oneshot', cacheTensors(kv, attnInputsOf(tensors, 'oneshot', layers), T, [], 'oneshot'))
  if (opts.split !== undefined) replaceCaches(tensors, 'chunked', cacheTensors(kv, attnInputsOf(tensors, 'chunked', layers), T, [opts.split], 'chunked'))
  if (opts.attnInputs === false) for (const name of [...tensors.keys()]) if (name.endsWith('.attn_input')) tensors.delete(name)
  const metadata: Record<string, string> = {
    producer: DUMP_PRODUCER,
    profile: MLX_CPU_DUMP_PROFILE,
    cache_math: 'mlx-cpu',
    forward_profile: forward.name,
    profile_fingerprint: profileFingerprint(forward),
    checkpoint_sha256: await checkpointDigest(opts.model),
    tokens: String(T),
    split: opts.split === undefined ? '' : String(opts.split),
    greedy: String(opts.greedy ?? 0),
    attn_inputs: opts.attnInputs === false ? 'no' : 'yes',
  }
  return { tensors, metadata }
}

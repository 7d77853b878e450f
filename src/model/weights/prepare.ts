// prepareWeights: a checkpoint's weights as one numerics profile holds them. Each tensor is
// prepared on first use and kept, so only what the engine asks for is ever converted.
import { CheckpointError, ConfigError, NumericsError } from '../../errors.ts'
import { ACCUMULATION_ORDERS, matmulBf16, matmulF32, matmulPacked, PACKED_STRIP, packSequentialFma, type PackedWeight } from '../../kernels/index.ts'
import { roundBf16 } from '../../numerics/bf16.ts'
import type { WeightStore } from '../checkpoint/index.ts'
import type { DeepseekV4Config } from '../config.ts'
import { WEIGHT_FORMATS, WEIGHT_GROUPS, type NumericsProfile, type WeightFormat } from '../profiles/types.ts'
import { heldValues, holdMatrix, type HeldMatrix, type SourceMatrix } from './formats.ts'
import { isExpertTensor, parseLinearName } from './groups.ts'
import type { Linear, PreparedLinear, PreparedWeights } from './types.ts'

const EMBEDDING = 'model.embed_tokens.weight'

function checkProfile (profile: NumericsProfile): void {
  for (const group of WEIGHT_GROUPS) {
    const format = profile.weights?.[group]
    if (!WEIGHT_FORMATS.includes(format)) {
      throw new ConfigError(`profile ${profile.name}: weights.${group}`, `unknown weight format ${JSON.stringify(format)}; known: ${WEIGHT_FORMATS.join(', ')}`)
    }
  }
  if (!(ACCUMULATION_ORDERS as readonly string[]).includes(profile.matmulOrder)) {
    throw new ConfigError(`profile ${profile.name}: matmulOrder`, `must be one of ${ACCUMULATION_ORDERS.join(', ')}, got ${JSON.stringify(profile.matmulOrder)}`)
  }
  if (profile.vectors !== 'f32' && profile.vectors !== 'bf16') {
    throw new ConfigError(`profile ${profile.name}: vectors`, `must be 'f32' or 'bf16', got ${JSON.stringify(profile.vectors)}`)
  }
}

/**
 * The weights of `store` (a checkpoint for `cfg`) under `profile`:
 * - linear(name): the weight quantised/rounded to its group's format at first use, dequantised
 *   values held as bf16 codes where exact (else float32), products through matmulBf16/matmulF32
 *   in profile.matmulOrder, output float32 (the engine applies activation rounding); in the
 *   'sequential-fma' order each linear (and row block starting on a 16-row strip) also keeps W
 *   packed once, at first use, for matmulPacked: the same bits without the per-call transposes;
 * - vector(name): a float32 copy, rounded to bf16 when profile.vectors is 'bf16';
 * - tid2eid(layer): the hash table of a hash_moe layer as Int32Array;
 * - embedding(tokenId, out): the row of the embedding held in the 'embedding' group's format.
 * Bad names, shapes, dtypes, layers and token ids throw CheckpointError naming the tensor.
 */
export function prepareWeights (store: WeightStore, cfg: DeepseekV4Config, profile: NumericsProfile): PreparedWeights {
  checkProfile(profile)
  const dir = store.dir
  const order = { order: profile.matmulOrder }
  // Decode would pay the sequential-fma kernel's packing on every step: pack each W once instead.
  const packOnce = profile.matmulOrder === 'sequential-fma'
  const linears = new Map<string, PreparedLinear>()
  const vectors = new Map<string, Float32Array>()
  const tables = new Map<number, Int32Array>()
  let embeddingMatrix: HeldMatrix | undefined

  function source (tensor: string, expert: number | null): { src: SourceMatrix, rows: number, cols: number } {
    const shape = store.shape(tensor)
    const rank = expert === null ? 2 : 3
    if (shape.length !== rank) {
      const hint = expert === null && isExpertTensor(tensor) ? '; address one expert as name[e]' : ''
      throw new CheckpointError(tensor, `expected a ${rank}-D weight, found shape [${shape.join(', ')}]${hint}`, dir)
    }
    const [rows, cols] = shape.slice(-2)
    const e = expert ?? 0
    if (expert !== null && expert >= shape[0]) {
      throw new CheckpointError(tensor, `expert ${expert} is out of range: the tensor holds ${shape[0]} experts`, dir)
    }
    const size = rows * cols
    const dtype = store.get(tensor).dtype
    if (dtype === 'BF16') return { src: { dtype, codes: store.bf16(tensor).subarray(e * size, (e + 1) * size) }, rows, cols }
    if (dtype === 'F32') return { src: { dtype, values: store.f32(tensor).subarray(e * size, (e + 1) * size) }, rows, cols }
    throw new CheckpointError(tensor, `expected a BF16 or F32 weight, found ${dtype}`, dir)
  }

  function makeLinear (name: string): PreparedLinear {
    const parsed = parseLinearName(name)
    if (parsed === null) {
      const why = isExpertTensor(name)
        ? 'is a 3-D expert tensor: address one expert as name[e]'
        : store.has(name) ? 'is not a linear weight of DeepSeek-V4 (use vector() for norms, biases and hc params)' : 'is not a linear weight of DeepSeek-V4 and not in this checkpoint'
      throw new CheckpointError(name, why, dir)
    }
    const { tensor, expert, group } = parsed
    if (!store.has(tensor)) throw new CheckpointError(tensor, `not in this checkpoint (asked for linear ${JSON.stringify(name)})`, dir)
    const format: WeightFormat = profile.weights[group]
    const { src, rows, cols } = source(tensor, expert)
    const held = holdMatrix(src, rows, cols, format, tensor)
    const block = (first: number, count: number): Linear => {
      if (!Number.isSafeInteger(first) || !Number.isSafeInteger(count) || first < 0 || count < 1 || first + count > rows) {
        throw new CheckpointError(tensor, `rows [${first}, ${first + count}) are not inside its ${rows} rows`, dir)
      }
      const at = first * cols
      const end = at + count * cols
      if (packOnce && first % PACKED_STRIP === 0) {
        let packed: PackedWeight | undefined
        const pack = (): PackedWeight => (packed ??= packSequentialFma(held.container === 'bf16' ? held.codes.subarray(at, end) : held.values.subarray(at, end), count, cols))
        return { inFeatures: cols, outFeatures: count, apply: (x: Float32Array, m: number, out?: Float32Array) => matmulPacked(x, m, cols, pack(), out) }
      }
      if (held.container === 'bf16') {
        const codes = held.codes.subarray(at, end)
        const apply = (x: Float32Array, m: number, out?: Float32Array): Float32Array => matmulBf16(x, m, cols, codes, count, out, order)
        return { inFeatures: cols, outFeatures: count, apply, bf16Matmul: { codes, order: profile.matmulOrder } }
      }
      const apply = (x: Float32Array, m: number, out?: Float32Array): Float32Array => matmulF32(x, m, cols, held.values.subarray(at, end), count, out, order)
      return { inFeatures: cols, outFeatures: count, apply }
    }
    const { apply, bf16Matmul } = block(0, rows)
    return { name, group, format, container: held.container, inFeatures: cols, outFeatures: rows, apply, bf16Matmul, values: () => heldValues(held), rowBlock: block }
  }

  function embeddingHeld (): HeldMatrix {
    if (embeddingMatrix === undefined) {
      const { src, rows, cols } = source(EMBEDDING, null)
      if (rows !== cfg.vocabSize || cols !== cfg.hiddenSize) {
        throw new CheckpointError(EMBEDDING, `shape [${rows}, ${cols}] does not match the config's [vocab_size, hidden_size] = [${cfg.vocabSize}, ${cfg.hiddenSize}]`, dir)
      }
      embeddingMatrix = holdMatrix(src, rows, cols, profile.weights.embedding, EMBEDDING)
    }
    return embeddingMatrix
  }

  return {
    profile,
    linear (name) {
      let l = linears.get(name)
      if (l === undefined) linears.set(name, l = makeLinear(name))
      return l
    },
    vector (name) {
      let v = vectors.get(name)
      if (v === undefined) {
        if (name === EMBEDDING) throw new CheckpointError(name, 'is the embedding: use embedding(tokenId, out), or linear() for the tied LM head', dir)
        const parsed = parseLinearName(name)
        if (parsed !== null || isExpertTensor(name)) throw new CheckpointError(name, `is a linear weight (group ${parsed?.group ?? 'experts'}): use linear()`, dir)
        v = Float32Array.from(store.f32(name))
        if (profile.vectors === 'bf16') for (let i = 0; i < v.length; i++) v[i] = roundBf16(v[i])
        vectors.set(name, v)
      }
      return v
    },
    tid2eid (layer) {
      let t = tables.get(layer)
      if (t === undefined) {
        const name = `model.layers.${String(layer)}.mlp.gate.tid2eid`
        if (!Number.isSafeInteger(layer) || layer < 0 || layer >= cfg.numHiddenLayers) {
          throw new CheckpointError(name, `layer ${String(layer)} is not a layer index in [0, ${cfg.numHiddenLayers})`, dir)
        }
        if (cfg.mlpLayerTypes[layer] !== 'hash_moe') {
          throw new CheckpointError(name, `layer ${layer} is a ${cfg.mlpLayerTypes[layer]} layer: only hash_moe layers have a token -> expert table`, dir)
        }
        const ids = store.i64(name)
        t = new Int32Array(ids.length)
        for (let i = 0; i < ids.length; i++) {
          const id = ids[i]
          if (id < 0n || id >= BigInt(cfg.nRoutedExperts)) {
            throw new CheckpointError(name, `entry ${i} is expert ${id}, outside [0, ${cfg.nRoutedExperts})`, dir)
          }
          t[i] = Number(id)
        }
        tables.set(layer, t)
      }
      return t
    },
    embedding (tokenId, out) {
      const held = embeddingHeld()
      const hidden = cfg.hiddenSize
      if (!Number.isSafeInteger(tokenId) || tokenId < 0 || tokenId >= cfg.vocabSize) {
        throw new CheckpointError(EMBEDDING, `token id ${String(tokenId)} is outside the vocabulary [0, ${cfg.vocabSize})`, dir)
      }
      if (!(out instanceof Float32Array) || out.length !== hidden) {
        throw new NumericsError(`embedding: out must be a Float32Array of hidden_size = ${hidden} values, got ${out instanceof Float32Array ? `${out.length} values` : String(out)}`)
      }
      const start = tokenId * hidden
      if (held.container === 'f32') {
        out.set(held.values.subarray(start, start + hidden))
      }
      else {
        const bits = new Uint32Array(out.buffer, out.byteOffset, hidden)
        for (let i = 0; i < hidden; i++) bits[i] = held.codes[start + i] << 16
      }
      return out
    },
  }
}

// `pd-bridge export-weights`: the decoder's kv-path weights as it holds them, plus sidecar.json,
// for the capture hook on the prefill side (docs/capture.md).
import { Command } from 'commander'
import { DEFAULT_BLOCK_SIZE, parseBlockSize } from '../../config/block-size.ts'
import { PdBridgeError } from '../../errors.ts'
import { exportWeights } from '../../capture/index.ts'
import { startProgress } from '../../progress/index.ts'
import { CACHE_MATHS, DEFAULT_CACHE_MATH, type CacheMathName } from '../../wire/sidecar-format.ts'

/** The export-weights command. */
export const exportWeightsCommand = new Command('export-weights')
  .description('export the weights the decoder\'s cache depends on (kv projection and norm, compressor and indexer-compressor projections, position biases, norms) as the decoder holds them after its own quantisation, plus a JSON sidecar with the geometry fingerprint')
  .requiredOption('--model <dir>', 'checkpoint directory (config.json + safetensors)')
  .requiredOption('--profile <name>', 'the decoder\'s numerics profile: f32 | hf-bf16 | decoder | prefill, optionally +refquant')
  .requiredOption('--out <dir>', 'sidecar directory to write (created if absent; sidecar.json and weights.safetensors are replaced)')
  .option('--block-size <n>', 'the decoder store\'s block size in tokens', (t: string) => parseBlockSize(t), DEFAULT_BLOCK_SIZE)
  .option('--cache-math <name>', `the cache arithmetic: ${CACHE_MATHS.join(' | ')} (decoder: the profile's own kv path; mlx-cpu: MLX's CPU arithmetic, oMLX's cache, with the weights as mlx_lm.convert quantizes them)`, DEFAULT_CACHE_MATH)
  .action(async (opts: { model: string, profile: string, out: string, blockSize: number, cacheMath: string }) => {
    if (!(CACHE_MATHS as readonly string[]).includes(opts.cacheMath)) {
      throw new PdBridgeError(`--cache-math must be one of ${CACHE_MATHS.join(', ')}, got ${JSON.stringify(opts.cacheMath)}`)
    }
    const progress = startProgress({ label: 'export-weights', unit: 'tensors' })
    let sidecar
    try {
      sidecar = await exportWeights({ model: opts.model, profile: opts.profile, out: opts.out, blockSize: opts.blockSize, cacheMath: opts.cacheMath as CacheMathName, onTensor: (done) => progress.tick(done) })
    }
    catch (err) {
      progress.fail()
      throw err
    }
    progress.done()
    const j = sidecar.json
    process.stdout.write(
      `wrote ${sidecar.dir}: profile ${j.profile.name}, cache math ${sidecar.cacheMath}, ${j.layers.length} layers, ${j.weights.tensors.length} tensors ` +
      `(${j.weights.bytes} bytes), window ${j.slidingWindow}, max_position_embeddings ${j.maxPositionEmbeddings}, block size ${j.blockSize}\n` +
      `fingerprint ${sidecar.fingerprint}\n`,
    )
  })

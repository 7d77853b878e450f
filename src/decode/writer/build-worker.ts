// A block builder thread (build-pool.ts): opens the capture's layer files once (the writer's
// thread has already checked their sizes and SHA-256), then builds the blocks it is asked for with
// buildEncodedBlock, exactly as the writer's own thread would, and hands back each file's bytes
// (transferred, not copied). Messages: { k, hash, parentHash } in; { k, built } or { k, error } out.
import { parentPort, workerData } from 'node:worker_threads'
import { SafetensorsFile } from '../../formats/safetensors/index.ts'
import { parseLayerFileMeta } from '../../wire/layer-file.ts'
import { buildEncodedBlock, type BlockBuildContext } from './block-build.ts'
import { LayerFileReader } from './capture-files.ts'
import type { BuilderInit } from './build-pool.ts'

const init = workerData as BuilderInit

async function openFiles (): Promise<LayerFileReader[]> {
  const files: LayerFileReader[] = []
  for (const { index, path } of init.layerFiles) {
    const file = await SafetensorsFile.open(path)
    files.push(new LayerFileReader(index, path, parseLayerFileMeta(file.metadata, path), file))
  }
  return files
}

const ready: Promise<BlockBuildContext> = openFiles().then((files) => ({ cfg: init.cfg, layout: init.layout, storage: init.storage, authKey: init.authKey, files }))
// A failed open is reported with the first job (and every later one).
ready.catch(() => {})

parentPort?.on('message', (job: { k: number, hash: string, parentHash: string | null } | 'close') => {
  void (async () => {
    if (job === 'close') {
      const ctx = await ready.catch(() => null)
      await Promise.all((ctx?.files ?? []).map(async (f) => await f.close()))
      parentPort?.close()
      return
    }
    try {
      const built = await buildEncodedBlock(await ready, job.k, job.hash, job.parentHash)
      parentPort?.postMessage({ k: job.k, built }, [built.encoded.bytes.buffer as ArrayBuffer])
    } catch (e) {
      parentPort?.postMessage({ k: job.k, error: (e as Error).message ?? String(e) })
    }
  })()
})

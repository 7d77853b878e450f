// A capture streamed from the share into a local spool directory, in the capture's own layout
// (`<spoolRoot>/<requestId>/layer-XXX.safetensors` + manifest.json), so the writer reads it with
// offset reads like any local capture. Each layer lands as soon as the share client has verified
// it; the sealed manifest is written last, so a spool directory with a manifest is complete.
import { mkdir, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { PdBridgeError } from '../../errors.ts'
import { writeFileAtomicSync } from '../../wire/layer-file.ts'
import { captureDir, layerFileName, writeManifestAtomic, type CaptureRequest } from '../../wire/manifest.ts'
import { streamCapture, type StreamCaptureOptions, type StreamCaptureResult } from '../../share/index.ts'

/** Options of `spoolCapture`: the request, the share, where to spool, and stream tuning. */
export interface SpoolOptions extends CaptureRequest, Pick<StreamCaptureOptions, 'pollMs' | 'deadlineMs' | 'stallMs' | 'signal' | 'retry' | 'onEvent' | 'headers'> {
  /** The share's base URL. */
  baseUrl: string
  /** The spool root; the capture lands in `<spoolRoot>/<requestId>/` (which must not exist yet). */
  spoolRoot: string
}

/** A spooled capture. */
export interface SpoolResult {
  /** The local capture directory. */
  dir: string
  stream: StreamCaptureResult
  /** Milliseconds from the call until each layer file had landed, by layer index. */
  layerLandedMs: number[]
}

/**
 * Stream the capture of `requestId` from the share into the spool (every layer verified by the
 * share client against the manifest before it is written). Rejects as streamCapture does; a
 * failed stream removes the spool directory.
 */
export async function spoolCapture (options: SpoolOptions): Promise<SpoolResult> {
  const dir = captureDir(options.spoolRoot, options.requestId)
  await mkdir(options.spoolRoot, { recursive: true })
  try {
    await mkdir(dir)
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code
    throw new PdBridgeError(`${dir}: cannot create the spool directory: ${code === 'EEXIST' ? 'it already exists (another stream of this request?)' : code ?? (e as Error).message}`)
  }
  const t0 = performance.now()
  const layerLandedMs: number[] = []
  try {
    const stream = await streamCapture({
      ...options,
      onLayer: (index, bytes) => {
        writeFileAtomicSync(join(dir, layerFileName(index)), bytes)
        layerLandedMs[index] = performance.now() - t0
      },
    })
    await writeManifestAtomic(dir, stream.manifest)
    return { dir, stream, layerLandedMs }
  } catch (e) {
    await rm(dir, { recursive: true, force: true })
    throw e
  }
}

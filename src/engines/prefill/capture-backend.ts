// The real capture backend: the decoder's sidecar loaded once (and checked against the engine's
// model), and one CaptureSession per request (src/capture). The hook computes the decoder's
// caches from the attention inputs it is fed; with `spill`, every capture streams (src/capture/spill.ts).
import { join } from 'node:path'
import { mountCarry } from '../../capture/carry.ts'
import { CaptureSession, loadSidecar, type Sidecar } from '../../capture/index.ts'
import { SafetensorsFile } from '../../formats/safetensors/index.ts'
import { ModelCache } from '../../model/engine/index.ts'
import { SIDECAR_JSON } from '../../wire/sidecar-format.ts'
import type { OpenCaptureBackend } from './server.ts'
import { checkSidecarAgreesWithModel } from './sidecar-agreement.ts'

/** Load the sidecar, check it against the model, and open captures with it under the capture root. */
export const openCaptureBackend: OpenCaptureBackend = async ({ sidecarDir, captureRoot, config, modelDir, spill }) => {
  const sidecar = await loadSidecar(sidecarDir)
  checkSidecarAgreesWithModel(sidecar.json, config, join(sidecar.dir, SIDECAR_JSON), modelDir)
  return {
    fingerprint: sidecar.fingerprint,
    profile: sidecar.profile.name,
    blockSize: sidecar.json.blockSize,
    startCapture: async ({ resumeFrom, ...o }) => CaptureSession.start({
      sidecar, captureRoot, ...o, spill: spill === true, ...(resumeFrom === undefined ? {} : { resume: await hookCache(sidecar, resumeFrom) }),
    }),
  }
}

/** The hook's own copy of the carry's cache, in the sidecar's kv path layout. */
async function hookCache (sidecar: Sidecar, path: string): Promise<ModelCache> {
  const file = await SafetensorsFile.open(path)
  try {
    return await mountCarry(file, new ModelCache(sidecar.kvPath.layers.map((a) => a.makeCache())), path)
  } finally {
    await file.close()
  }
}

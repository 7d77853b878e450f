// The real capture backend: the decoder's sidecar loaded once (and checked against the engine's
// model), and one CaptureSession per request (src/capture). The hook computes the decoder's
// caches from the attention inputs it is fed; with `spill`, every capture streams (src/capture/spill.ts).
import { join } from 'node:path'
import { CaptureSession, loadSidecar } from '../../capture/index.ts'
import { SIDECAR_JSON } from '../../wire/sidecar-format.ts'
import type { OpenCaptureBackend } from './server.ts'
import { checkSidecarAgreesWithModel } from './sidecar-agreement.ts'

/** Load the sidecar, check it against the model, and open captures with it under the capture root. */
export const openCaptureBackend: OpenCaptureBackend = async ({ sidecarDir, captureRoot, config, modelDir, spill }) => {
  const sidecar = await loadSidecar(sidecarDir)
  checkSidecarAgreesWithModel(sidecar.json, config, join(sidecar.dir, SIDECAR_JSON), modelDir)
  return {
    fingerprint: sidecar.fingerprint,
    startCapture: async (o) => CaptureSession.start({ sidecar, captureRoot, ...o, spill: spill === true }),
  }
}

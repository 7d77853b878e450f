// The kind `omlx`: oMLX (the reference system's decoder, on a Mac) as the decoder whose paged SSD
// cache the bridge writes into (src/engines/omlx, docs/omlx.md). pd-bridge never starts it: the
// record's `external` part says where serve finds the running one, and its launch refuses.
import { DECODER_CLIENT_ROUTES } from '../../engines/decoder/routes.ts'
import { DECODER_DEFAULTS } from '../../engines/decoder/launch.ts'
import { checkOmlxStoreOptions, OMLX_KIND } from '../../engines/omlx/index.ts'
import { ConfigError, PdBridgeError } from '../../errors.ts'
import { EMBEDDED_SERVER_RULES } from '../embedded-request-rules.ts'
import type { DecoderKind } from '../kind.ts'
import { presentKeys } from '../ours/demo-blocks.ts'
import { omlxTarget } from './target.ts'

const NAME = OMLX_KIND

/** Why pd-bridge does not run this decoder, for every place that would start it. */
const NOT_STARTED = `pd-bridge cannot start oMLX: it runs on a Mac; start it there and point pd-bridge at it (serve --decoder ${NAME} --omlx-cache-dir DIR --omlx-url URL --omlx-model-name PATH, or decoder.engine ${NAME} in a front door config; docs/omlx.md)`

export const omlxDecoderKind: DecoderKind = {
  name: NAME,
  summary: 'oMLX on a Mac, not started here: blocks go into its own paged SSD cache directory, mounted here (docs/omlx.md)',
  homes: ['src/decoders/omlx', 'src/engines/omlx'],
  // MLX's CPU rules (src/capture/mlx-cpu): the arithmetic oMLX's caches are computed in.
  cacheMath: 'mlx-cpu',
  configKeys: ['omlxBlocks'],
  geometrySource: (decoder) => `profile ${decoder.profile} in oMLX's cache directory`,
  command: {
    flags: [],
    check: () => { throw new PdBridgeError(NOT_STARTED) },
    launch: async () => { throw new PdBridgeError(NOT_STARTED) },
  },
  store: {
    label: NAME,
    // The directory is oMLX's: its files are never swept, moved or evicted by us.
    sweepTempsAtStart: false,
    openTarget: async (o) => {
      // The default (asked from the decoder) would be oMLX's model id, not the path its keys hash.
      if (o.decoder.modelName === undefined) throw new ConfigError('decoder.modelName', `the ${NAME} decoder needs it set (PD_MODEL_NAME): the model directory's full path on the Mac, which oMLX hashes into every block key`)
      return await omlxTarget({
        cacheDir: o.cacheDir,
        modelName: o.decoder.modelName,
        cfg: o.cfg,
        profile: o.decoder.profile,
        // An mlx-cpu sidecar's blocks are oMLX's own arithmetic: the store's geometry records it.
        ...(o.cacheMath !== undefined ? { cacheMath: o.cacheMath } : {}),
        blockSize: o.blockSize,
        omlxBlocks: o.decoder.omlxBlocks,
        builders: o.builders,
        log: o.log,
        ...(o.authKey !== undefined ? { authKey: o.authKey } : {}),
      })
    },
  },
  // oMLX is not our server: under requestRules auto its /v1/models is not ours, so rules stay off;
  // `embedded` checks with the embedded server's rules, the OpenAI subset oMLX also serves.
  requestRules: EMBEDDED_SERVER_RULES,
  // oMLX serves the same OpenAI client routes (docs/omlx.md).
  clientRoutes: DECODER_CLIENT_ROUTES,
  stack: {
    mirrorIndexerHeads: false,
    needsGguf: false,
    storeLabel: (profile) => `${NAME}-${profile}`,
    decoderArgs: () => { throw new PdBridgeError(NOT_STARTED) },
    frontDecoderConfig: {},
  },
  external: {
    // serve --decoder omlx: the sidecar is exported under this profile with the record's cacheMath
    // (mlx-cpu), so the capture hook pools in MLX's CPU arithmetic; the attention inputs are still
    // our prefill engine's forward in this profile (docs/omlx.md, "Not done").
    stackProfile: DECODER_DEFAULTS.profile,
    docs: 'docs/omlx.md',
    serveFlags: {
      cacheDir: { flag: '--omlx-cache-dir', value: '<dir>', help: `with --decoder ${NAME}: oMLX's paged SSD cache directory, mounted here; blocks are written there` },
      url: { flag: '--omlx-url', value: '<url>', help: `with --decoder ${NAME}: oMLX's server base URL (requests are forwarded there)` },
      modelName: { flag: '--omlx-model-name', value: '<path>', help: `with --decoder ${NAME}: the model directory's full path on the Mac, which oMLX hashes into block keys` },
    },
    checkStore: (o) => { checkOmlxStoreOptions(o) },
  },
  demo: {
    modelNote: `decoder ${NAME}, `,
    nativeLeg: 'oMLX with an empty cache (not run by pd-bridge)',
    passLine: 'PASS',
    present: presentKeys,
    compare: async () => { throw new PdBridgeError(`pd-bridge demo cannot compare with ${NAME}: ${NOT_STARTED}`) },
    problem: () => `the demo does not run ${NAME}`,
    rows: () => [['verify-blocks', `(not compared: the demo does not run ${NAME})`]],
  },
}

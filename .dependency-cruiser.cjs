// The layers of src/, lowest first, written down once (issue #19). A module may import its own
// layer and the layers below it, never one above; no import cycle anywhere. `npm run lint` runs it.
//
//   base      errors, formats, numerics, http, config, progress: no project imports but each other
//   kernels   native kernels and their Math.fround references
//   model     config, checkpoints, tokenizer, the engine
//   wire      what capture, share and decode agree on: geometry fingerprint, JSON, block size, the
//             capture manifest, the layer file, the boundary snapshot, the sidecar format
//   capture, share, decode
//             three siblings over wire (capture: the hook, sessions, sidecars; share: the capture
//             share's server and client; decode: block store, writer, prefix cache). One layer
//             because none sits above another (in a row, share could import capture); the upward
//             rule lets them import each other, capture-share-decode-apart below forbids it: they
//             agree through wire alone
//   engines   prefill engine, decoder server, llama.cpp and torch adapters
//   front     the front door
//   stack     the embedded stack (serve, demo, doctor)
//   proof     what verifies a deployment rather than runs in it: results, needle, then gate
//   cli       the command line, over everything
const LAYERS = [
  ['errors', 'formats', 'numerics', 'http', 'config', 'progress'],
  ['kernels'],
  ['model'],
  ['wire'],
  ['capture', 'share', 'decode'],
  ['engines'],
  ['front'],
  ['stack'],
  ['results', 'needle'],
  ['gate'],
  ['cli'],
]

const folders = (layer) => `^src/(${layer.join('|')})(/|\\.ts$)`

const upward = LAYERS.slice(0, -1).map((layer, i) => ({
  name: `no-upward-from-${layer.join('-')}`,
  comment: `${layer.join(', ')} may not import a higher layer (${LAYERS.slice(i + 1).flat().join(', ')})`,
  severity: 'error',
  from: { path: folders(layer) },
  to: { path: folders(LAYERS.slice(i + 1).flat()) },
}))

// The one exemption from the siblings rule: the block writer's spool imports the share. It
// moves to the front door's capture-source stage (issue #19 item 4).
const SPOOL = '^src/decode/writer/spool\\.ts$'

module.exports = {
  forbidden: [
    ...upward,
    {
      name: 'capture-share-decode-apart',
      comment: 'capture, share and decode do not import each other; what they agree on is in wire',
      severity: 'error',
      from: { path: '^src/(capture|share|decode)/', pathNot: SPOOL },
      to: { path: '^src/(capture|share|decode)/', pathNot: '^src/$1/' },
    },
    {
      name: 'spool-reads-only-the-share',
      comment: 'the spool\'s exemption above covers the share, not capture',
      severity: 'error',
      from: { path: SPOOL },
      to: { path: '^src/capture/' },
    },
    {
      name: 'no-circular',
      comment: 'no import cycle, type-only imports included',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true },
    },
    {
      name: 'every-src-folder-has-a-layer',
      comment: 'a new top-level folder of src/ must be placed in LAYERS',
      severity: 'error',
      from: { path: '^src/', pathNot: folders(LAYERS.flat()) },
      to: {},
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    exclude: { path: '(^|/)node_modules/' },
  },
}

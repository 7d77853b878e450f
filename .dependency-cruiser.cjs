// The layers of the repository's code, lowest first, written down once (issue #19). A module may
// import its own layer and the layers below it, never one above; no import cycle anywhere.
// `npm run lint` runs it over src, verify and bin.
//
// Three houses, imports one way only: bin -> verify -> src.
//   src/      what runs in a deployment
//   verify/   what proves a deployment rather than runs in it; may import src/
//   bin/      the command line's composition root (src/cli's program plus verify/cli's commands)
//
// src's layers:
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
//   decoders  the registry of decoder kinds: one record per kind over its engine and store
//   front     the front door
//   stack     the embedded stack (serve, demo, doctor)
//   cli       the runtime command line, over everything in src
//
// verify's layers: results and needle, then gate, then cli (the gate and results commands).
const LAYERS = [
  ['errors', 'formats', 'numerics', 'http', 'config', 'progress'],
  ['kernels'],
  ['model'],
  ['wire'],
  ['capture', 'share', 'decode'],
  ['engines'],
  ['decoders'],
  ['front'],
  ['stack'],
  ['cli'],
]

const PROOF_LAYERS = [
  ['results', 'needle'],
  ['gate'],
  ['cli'],
]

const folders = (house, layer) => `^${house}/(${layer.join('|')})(/|\\.ts$)`

const upward = (house, layers) => layers.slice(0, -1).map((layer, i) => ({
  name: `no-upward-from-${house}-${layer.join('-')}`,
  comment: `${house}/${layer.join(', ')} may not import a higher layer of ${house} (${layers.slice(i + 1).flat().join(', ')})`,
  severity: 'error',
  from: { path: folders(house, layer) },
  to: { path: folders(house, layers.slice(i + 1).flat()) },
}))

const placed = (house, layers) => ({
  name: `every-${house}-folder-has-a-layer`,
  comment: `a new top-level folder of ${house}/ must be placed in its layers`,
  severity: 'error',
  from: { path: `^${house}/`, pathNot: folders(house, layers.flat()) },
  to: {},
})

module.exports = {
  forbidden: [
    ...upward('src', LAYERS),
    ...upward('verify', PROOF_LAYERS),
    {
      name: 'src-runs-alone',
      comment: 'src/ (what runs in a deployment) may not import verify/ or bin/',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^(verify|bin)/' },
    },
    {
      name: 'verify-below-bin',
      comment: 'verify/ may not import bin/, the composition root',
      severity: 'error',
      from: { path: '^verify/' },
      to: { path: '^bin/' },
    },
    {
      name: 'capture-share-decode-apart',
      comment: 'capture, share and decode do not import each other; what they agree on is in wire',
      severity: 'error',
      from: { path: '^src/(capture|share|decode)/' },
      to: { path: '^src/(capture|share|decode)/', pathNot: '^src/$1/' },
    },
    {
      name: 'no-circular',
      comment: 'no import cycle, type-only imports included',
      severity: 'error',
      from: { path: '^(src|verify|bin)/' },
      to: { circular: true },
    },
    placed('src', LAYERS),
    placed('verify', PROOF_LAYERS),
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    exclude: { path: '(^|/)node_modules/' },
  },
}

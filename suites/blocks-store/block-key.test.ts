// Block keys are oMLX's compute_block_hash, byte for byte. The expected digests below were computed
// with node:crypto over the literal byte strings shown next to them (and agree with CPython 3.11's
// hashlib over the same inputs, str(tuple(ids)) included).
import { createHash } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import { blockKeyChain, blockKeyHex, computeBlockHash, pyTuple, pythonRepr, tokenTupleText } from '../../src/decode/store/index.ts'
import { pythonJsonDumps } from '../../src/wire/python-json.ts'

const hex = (key: Uint8Array): string => blockKeyHex(key)

describe('computeBlockHash matches hand-computed SHA-256 digests', () => {
  // sha256("/models/dsv4" + "omlx-root" + "(1, 2, 3)")
  const FIRST = '5a7ccdb87940dc17141127e84fb0089cdb2ab2a9a219fdfa4ffee99366af28d0'
  // sha256("/models/dsv4" + <32 raw bytes of FIRST> + "(4, 5, 6)")
  const SECOND = 'df43834fa164f8639e58fa8d6843187aa028fe1fcf8d0cd9608955bc2bafe452'

  it('hashes model name, "omlx-root" and the token tuple for a first block', () => {
    expect(hex(computeBlockHash(null, [1, 2, 3], undefined, '/models/dsv4'))).toBe(FIRST)
    // The same digest from the literal bytes, so the test shows what is hashed.
    const literal = createHash('sha256').update('/models/dsv4').update('omlx-root').update('(1, 2, 3)').digest('hex')
    expect(literal).toBe(FIRST)
  })

  it('chains: the parent\'s 32 raw bytes replace "omlx-root"', () => {
    const first = computeBlockHash(null, [1, 2, 3], undefined, '/models/dsv4')
    expect(hex(computeBlockHash(first, [4, 5, 6], undefined, '/models/dsv4'))).toBe(SECOND)
    const literal = createHash('sha256').update('/models/dsv4').update(Buffer.from(FIRST, 'hex')).update('(4, 5, 6)').digest('hex')
    expect(literal).toBe(SECOND)
  })

  it('skips an empty model name and writes one token as "(5,)"', () => {
    // sha256("omlx-root" + "(5,)")
    expect(hex(computeBlockHash(null, [5], undefined, ''))).toBe('e3e98de3a1e4df0df19a4ef372d4f5f5bf928e88752846f60c90c07dfe8e0d7d')
  })

  it('writes no tokens as "()"', () => {
    // sha256("/models/dsv4" + "omlx-root" + "()")
    expect(hex(computeBlockHash(null, [], undefined, '/models/dsv4'))).toBe('ff7a28ae940e89cb4ec16dbfe53de44383e40dbda4b093c74a18e864b730bbc7')
  })

  it('appends str(extra_keys) when truthy and ignores an empty tuple', () => {
    // sha256("/models/dsv4" + "omlx-root" + "(1, 2, 3)" + "('specprefill-static-exact-v1',)")
    expect(hex(computeBlockHash(null, [1, 2, 3], pyTuple('specprefill-static-exact-v1'), '/models/dsv4')))
      .toBe('7227f0fbaef9f9660c31abb5bdc18b8cb8375f0977fe780551174e69f5b9d1cd')
    expect(hex(computeBlockHash(null, [1, 2, 3], pyTuple(), '/models/dsv4'))).toBe(FIRST)
    expect(hex(computeBlockHash(null, [1, 2, 3], '', '/models/dsv4'))).toBe(FIRST)
  })

  it('encodes a non-ASCII model name as UTF-8', () => {
    // sha256(utf8("/mödels/ü") + "omlx-root" + "(0, 128000, 7)")
    expect(hex(computeBlockHash(null, [0, 128000, 7], undefined, '/mödels/ü'))).toBe('8ac228e5b685851c65a5a17baa4a9580e61ac69be63160a2ef6a352cfbe81369')
  })
})

describe('tokenTupleText is Python\'s str(tuple(ids))', () => {
  it('prints tuples of ints as CPython does', () => {
    expect(tokenTupleText([1, 2, 3])).toBe('(1, 2, 3)')
    expect(tokenTupleText([5])).toBe('(5,)')
    expect(tokenTupleText([])).toBe('()')
    expect(tokenTupleText(Uint32Array.of(7, 0))).toBe('(7, 0)')
    expect(tokenTupleText([-1, 12345678901234n])).toBe('(-1, 12345678901234)')
  })

  it('refuses a token id that is not an integer, naming its position', () => {
    expect(() => tokenTupleText([1, 2.5])).toThrow(/position 1 is 2\.5/)
    expect(() => tokenTupleText([Number.NaN])).toThrow(/position 0/)
  })
})

describe('pythonRepr renders extra keys as CPython 3.11 does', () => {
  it('picks quotes and escapes like repr(str)', () => {
    // Expected strings are CPython's repr() of the same values.
    expect(pythonRepr(pyTuple("it's", 'a"b', 'x\ny\t\\', '\xa0\xad\u200b\u{1F600}é', '\x7f\x01')))
      .toBe(`("it's", 'a"b', 'x\\ny\\t\\\\', '\\xa0\\xad\\u200b\u{1F600}é', '\\x7f\\x01')`)
  })

  it('prints lists, one-element tuples, None and booleans', () => {
    expect(pythonRepr(['a', pyTuple('b'), pyTuple(1, -2), null, true, false, []])).toBe("['a', ('b',), (1, -2), None, True, False, []]")
  })

  it('refuses floats, which JavaScript cannot print as Python does', () => {
    expect(() => pythonRepr(pyTuple(1.5))).toThrow(/not a safe integer/)
  })
})

describe('pythonJsonDumps writes what json.dumps writes', () => {
  it('compact sorted form with ensure_ascii (the signature)', () => {
    // CPython: json.dumps(v, sort_keys=True, separators=(",", ":"))
    const v = { model_name: '/mödels/ü\u2028x"\\\n', num_layers: 3, b: [1, 'a', null, true, 1.5e-7, { z: 1, a: [] }], '\u{1F600}': 1, '\uff61': 2 }
    expect(pythonJsonDumps(v, { compact: true, sortKeys: true }))
      .toBe('{"b":[1,"a",null,true,1.5e-07,{"a":[],"z":1}],"model_name":"/m\\u00f6dels/\\u00fc\\u2028x\\"\\\\\\n","num_layers":3,"\\uff61":2,"\\ud83d\\ude00":1}')
  })

  it('default separators (layer_cache_types, layer_meta_states)', () => {
    expect(pythonJsonDumps([['0', '128', '2048', '128'], [['RotatingKVCache', 'PoolingCache'], [['0', '128', '2048', '128'], 128]], []]))
      .toBe('[["0", "128", "2048", "128"], [["RotatingKVCache", "PoolingCache"], [["0", "128", "2048", "128"], 128]], []]')
  })
})

describe('blockKeyChain keys full blocks only, each depending on everything before it', () => {
  it('gives one key per full block and none for the trailing partial block', () => {
    const ids = Array.from({ length: 10 }, (_, i) => i)
    const keys = blockKeyChain('/m', ids, 4)
    expect(keys).toHaveLength(2)
    expect(keys[0]).toBe(hex(computeBlockHash(null, [0, 1, 2, 3], undefined, '/m')))
    expect(keys[1]).toBe(hex(computeBlockHash(Buffer.from(keys[0], 'hex'), [4, 5, 6, 7], undefined, '/m')))
  })

  it('keys of a prefix are a prefix of the keys; a changed token changes its block and every later one', () => {
    fc.assert(fc.property(fc.array(fc.integer({ min: 0, max: 1000 }), { minLength: 8, maxLength: 40 }), fc.nat(), (ids, at) => {
      const keys = blockKeyChain('/m', ids, 4)
      const cut = Math.floor(ids.length / 2)
      expect(blockKeyChain('/m', ids.slice(0, cut), 4)).toEqual(keys.slice(0, Math.floor(cut / 4)))
      const i = at % ids.length
      const changed = [...ids]
      changed[i] += 1
      const other = blockKeyChain('/m', changed, 4)
      const b = Math.floor(i / 4)
      keys.forEach((k, n) => (n < b ? expect(other[n]).toBe(k) : expect(other[n]).not.toBe(k)))
    }), { numRuns: 100 })
  })

  it('isolates models: the same tokens under another model path get other keys', () => {
    expect(blockKeyChain('/a', [1, 2, 3, 4], 4)[0]).not.toBe(blockKeyChain('/b', [1, 2, 3, 4], 4)[0])
  })

  it('refuses a block size that is not a positive integer', () => {
    expect(() => blockKeyChain('/m', [1], 0)).toThrow(/block size must be a positive integer/)
  })
})

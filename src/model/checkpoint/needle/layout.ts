// The needle checkpoint's plan: which residual channel means what, which token is which, and the
// sizes of the signals the circuit (circuit.ts) writes. Channels 0..63 of the 256-wide residual are
// named flags; 64..255 carry a random per-token "texture" that only the layers nobody reads from
// (and unused cache dims) see, so that every cache the bridge writes is non-trivial.
import { NEEDLE_KEYS, NEEDLE_UNKNOWN, NEEDLE_VALUES, needleVocabulary } from './words.ts'
import { EOS_TOKEN, vocabLayout } from '../../tokenizer/index.ts'
import { PdBridgeError } from '../../../errors.ts'

/** Number of keys (marker/question pairs) and values the circuit codes. */
export const KEY_COUNT = NEEDLE_KEYS.length
export const VALUE_COUNT = NEEDLE_VALUES.length

/** Residual channels (indices into the hidden vector). */
export const CH = Object.freeze({
  /** 1 for every token: the bias every query and weight reads. */
  one: 0,
  /** Question token of key k (embedding flag). */
  question: 1,
  /** Marker token of key k (embedding flag). */
  marker: 1 + KEY_COUNT,
  /** Value token v (embedding flag). */
  value: 1 + 2 * KEY_COUNT,
  /** Set on tokens after which the answer is over (values and the unknown answer): drives EOS. */
  done: 1 + 2 * KEY_COUNT + VALUE_COUNT,
  /** Written by layer 0, head 0: "question k is in my window". */
  ask: 2 + 2 * KEY_COUNT + VALUE_COUNT,
  /** Written by layer 0, head 1: "the token before me is marker k" (I am a needle's value). */
  needle: 2 + 3 * KEY_COUNT + VALUE_COUNT,
  /** Written by layer 1, head 0: "the needle I attend holds value v". */
  answer: 2 + 4 * KEY_COUNT + VALUE_COUNT,
  /** First texture channel; texture runs to the end of the hidden vector. */
  texture: 64,
})

/** Norm of each token's texture vector (channels 64..hidden). */
export const TEXTURE_NORM = 4
/** Std of the small weights that copy texture into unused cache dims. */
export const TEXTURE_WEIGHT_STD = 0.01

/** Layer 0 (sliding window, main rope): head 0 copies the question's key, head 1 finds "previous token is a marker". */
export const LAYER0 = Object.freeze({
  /** Window-row dims: the question match dim, the question's key code, the marker's key code, texture. */
  questionMatchDim: 0,
  questionCodeDim: 1,
  markerCodeDim: 8,
  textureDims: [16, 64] as const,
  /** Main-rope pairs (the fastest: 1, 0.75, 0.56, 0.42 rad per token) that look one token back. */
  previousTokenPairs: [0, 1, 2, 3],
  /** Scores: question match, the marker one token back (off by one token it is 0.76 of this). */
  questionScore: 30,
  previousTokenScore: 40,
  /** Sinks: question head, previous-token head (between 0.76 * 40 = 30.3 and 40). */
  questionSink: 15,
  previousTokenSink: 35,
})

/** Layer 1 (CSA): head 0 retrieves through the pooled entries the indexer picks. */
export const LAYER1 = Object.freeze({
  /**
   * Compress-rope pairs that carry the match (docs/needle-checkpoint.md, angle budget): pairs
   * 16..19, fully interpolated by YaRN (f = f0 / 32), turning at most 0.64 rad over 8192 tokens.
   */
  matchPairs: [16, 17, 18, 19],
  /** Entry dims: value identity v at dim v; texture in the rest of the no-rope half. */
  identityDim: 0,
  textureDims: [20, 64] as const,
  /** Per-pair key norm after kv_norm: score per aligned pair = 0.5 * this (query pairs are 5.66 long). */
  pairKeyNorm: 24,
  /** Sink: a needle's two entries win when their score exceeds sink - ln 2 (full alignment gives 48). */
  sink: 35,
  /** Compressor gate per unit of a value token's flag: keeps the value's row in every pooled channel it writes. */
  gateWeight: 4,
})

/**
 * Where layer 1 carries the match for an architecture the circuit supports. The tiny architecture
 * (the `needle` preset; indexer heads of 128 with 64 rope dims): match pairs 16..19 (LAYER1) and the
 * indexer's needle flag on its unroped dim 0. The `needle-long` preset (the `long` architecture:
 * one indexer head of 64, every dim roped) serves 1,048,576 positions: the match moves to the four
 * slowest compress-rope pairs 28..31, and the indexer's flag to the first dim of the slowest pair
 * (31), whose relative turn stays under 0.3 rad over a million tokens, so a needle entry still
 * scores above 0 (docs/needle-checkpoint.md, "The long needle").
 */
export interface NeedlePlan {
  matchPairs: readonly number[]
  /** Indexer head dim that carries the needle flag (query and entries). */
  indexerFlagDim: number
  /** Indexer dims [lo, hi) of each entry half that carry texture. */
  indexerTextureDims: readonly [number, number]
}

/** The plan for `cfg`: by whether the indexer head has unroped dims. */
export function needlePlan (cfg: { indexHeadDim: number, qkRopeHeadDim: number }): NeedlePlan {
  if (cfg.indexHeadDim > cfg.qkRopeHeadDim) return { matchPairs: LAYER1.matchPairs, indexerFlagDim: 0, indexerTextureDims: [1, cfg.indexHeadDim] }
  const slowest = cfg.qkRopeHeadDim / 2 - 1
  const flag = cfg.indexHeadDim - cfg.qkRopeHeadDim + 2 * slowest
  return { matchPairs: [slowest - 3, slowest - 2, slowest - 1, slowest], indexerFlagDim: flag, indexerTextureDims: [0, flag] }
}

/** Head: logits per unit of residual flag. */
export const HEAD = Object.freeze({ answer: 8, unknown: 4, eos: 16 })

/** Token ids of the needle vocabulary in a vocabulary of `vocabSize`. */
export interface NeedleTokenIds {
  markers: number[]
  questions: number[]
  values: number[]
  unknown: number
  eos: number
}

/** Where needleVocabulary() lands in the needle preset's tokenizer (vocabLayout with those added tokens). */
export function needleTokenIds (vocabSize: number): NeedleTokenIds {
  const layout = vocabLayout(vocabSize, needleVocabulary())
  const id = (text: string): number => {
    const i = layout.tokens.indexOf(text)
    if (i < 0) throw new PdBridgeError(`needle checkpoint: ${JSON.stringify(text)} is not a token`)
    return i
  }
  return {
    markers: NEEDLE_KEYS.map((k) => id(k.marker)),
    questions: NEEDLE_KEYS.map((k) => id(k.question)),
    values: NEEDLE_VALUES.map(id),
    unknown: id(NEEDLE_UNKNOWN),
    eos: id(EOS_TOKEN),
  }
}

// What the decoder serves: one engine, its tokenizer and the facts requests are checked against.
import { PdBridgeError } from '../../errors.ts'
import { loadCheckpoint } from '../../model/checkpoint/index.ts'
import type { DeepseekV4Config } from '../../model/config.ts'
import { DeepseekV4Engine } from '../../model/engine/index.ts'
import type { Tokenizer } from '../../model/tokenizer/index.ts'

/** What the HTTP layer needs of a model, whichever engine runs it: prompts are tokenized with ours. */
export interface ServedModel {
  tokenizer: Tokenizer
  config: DeepseekV4Config
  /** The checkpoint directory. */
  dir: string
  /** The numerics profile's name. */
  profileName: string
}

/** A loaded model of our engine, ready to serve. */
export interface DecoderModel extends ServedModel {
  engine: DeepseekV4Engine
}

/** Load the checkpoint once under `profile`; the directory must hold a tokenizer.json. */
export async function loadDecoderModel (dir: string, profile: string): Promise<DecoderModel> {
  const checkpoint = await loadCheckpoint(dir)
  if (checkpoint.tokenizer === undefined) {
    throw new PdBridgeError(`${dir}: no tokenizer.json; the decoder server needs the checkpoint's tokenizer to render and encode prompts`)
  }
  const engine = DeepseekV4Engine.fromCheckpoint(checkpoint, profile)
  return { engine, tokenizer: checkpoint.tokenizer, config: checkpoint.config, dir, profileName: engine.profile.name }
}

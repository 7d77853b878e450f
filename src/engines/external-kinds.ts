// Decoder kinds that live in their own folder and run outside the stack (today: omlx, on a Mac):
// the one place the front door's setup and `serve` look a kind up by its config name. The
// decoder-kind registry replaces this map when it lands.
import { omlxKind } from './omlx/index.ts'

export const EXTERNAL_DECODER_KINDS = { [omlxKind.name]: omlxKind } as const

export type ExternalDecoderKind = typeof EXTERNAL_DECODER_KINDS[keyof typeof EXTERNAL_DECODER_KINDS]

/** The external kind named `name`, or undefined for a kind the stack runs itself (ours, llama.cpp). */
export function externalDecoderKind (name: string): ExternalDecoderKind | undefined {
  return Object.hasOwn(EXTERNAL_DECODER_KINDS, name) ? EXTERNAL_DECODER_KINDS[name as keyof typeof EXTERNAL_DECODER_KINDS] : undefined
}

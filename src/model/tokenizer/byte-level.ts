// GPT-2's byte-level alphabet: every byte gets a printable character, so a BPE vocabulary of
// strings can hold arbitrary UTF-8 bytes.

function buildByteToChar (): string[] {
  const table: string[] = new Array(256)
  // Printable bytes keep their own character...
  const isPrintable = (b: number) => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff)
  let next = 0
  for (let b = 0; b < 256; b++) {
    // ...and the others (controls, space, 0x7f-0xa0, 0xad) move to U+0100 upwards, in byte order.
    table[b] = isPrintable(b) ? String.fromCharCode(b) : String.fromCharCode(256 + next++)
  }
  return table
}

/** The character that stands for each byte (index = byte value). */
export const BYTE_TO_CHAR: readonly string[] = buildByteToChar()

/** The byte each byte-level character stands for. */
export const CHAR_TO_BYTE: ReadonlyMap<string, number> = new Map(BYTE_TO_CHAR.map((c, b) => [c, b]))

const utf8 = new TextEncoder()

/** Map a piece of text to its byte-level string (UTF-8 bytes, one character per byte). */
export function toByteLevel (text: string): string {
  let out = ''
  for (const b of utf8.encode(text)) out += BYTE_TO_CHAR[b]
  return out
}

/**
 * The bytes a token stands for, as Hugging Face's ByteLevel decoder reads it: if every character
 * is a byte-level character, those bytes; otherwise (special tokens) the token's own UTF-8 bytes.
 */
export function tokenBytes (token: string): Uint8Array {
  const bytes = new Uint8Array(token.length)
  for (let i = 0; i < token.length; i++) {
    const b = CHAR_TO_BYTE.get(token[i])
    if (b === undefined) return utf8.encode(token)
    bytes[i] = b
  }
  return bytes
}

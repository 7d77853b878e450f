// A streamed chat reply split the way its chat format splits a whole one (DeepSeek's encodings:
// reasoning, content, tool calls), so that what a client accumulates from the stream is the
// non-streamed message field for field. Reasoning and content go out as soon as the format says no
// later text can change them; tool calls only when the reply has ended, because only then is a call
// block known to be one (a reply outside the format is plain content, as in the whole answer).
import type { ChatRenderOptions, ChatRenderer, ReplyParts } from '../../model/tokenizer/index.ts'

/** A piece of a split reply: the new reasoning and content text (absent when none). */
export interface ReplyDelta {
  reasoning_content?: string
  content?: string
}

/** The end of a split reply: the text not yet sent, and the whole reply's parts (its tool calls). */
export interface ReplyEnd {
  delta: ReplyDelta
  parts: ReplyParts
}

type SplittingFormat = Required<Pick<ChatRenderer, 'parseReply' | 'settledReply'>>

/** Whether a delta carries any text. */
export function hasText (d: ReplyDelta): boolean {
  return d.reasoning_content !== undefined || d.content !== undefined
}

function rest (field: string, sent: string, which: string): string {
  // The format promised its settled text starts the final field; anything else is a bug, not a reply.
  if (!field.startsWith(sent)) throw new Error(`reply stream: the ${which} sent is not the start of the reply's ${which}`)
  return field.slice(sent.length)
}

/** One choice's reply, fed the text pieces as they are generated. */
export class ReplyStreamer {
  private text = ''
  private sentReasoning = ''
  private sentContent = ''

  constructor (private readonly format: SplittingFormat, private readonly options: ChatRenderOptions | undefined) {}

  /** The streamer for a chat format that splits replies; undefined where it does not (a Jinja template: the text goes out as content). */
  static for (format: ChatRenderer, options: ChatRenderOptions | undefined): ReplyStreamer | undefined {
    const { parseReply, settledReply } = format
    if (parseReply === undefined || settledReply === undefined) return undefined
    return new ReplyStreamer({ parseReply: parseReply.bind(format), settledReply: settledReply.bind(format) }, options)
  }

  /** Add a generated piece; returns the reasoning and content it settled. */
  push (piece: string): ReplyDelta {
    this.text += piece
    const settled = this.format.settledReply(this.text, this.options)
    return this.advance(settled.reasoning_content ?? '', settled.content)
  }

  /** The reply is complete as `text` (what the whole answer parses): the rest of its text, and its parts. */
  finish (text: string): ReplyEnd {
    const parts = this.format.parseReply(text, this.options)
    return { delta: this.advance(parts.reasoning_content ?? '', parts.content), parts }
  }

  private advance (reasoning: string, content: string): ReplyDelta {
    const delta: ReplyDelta = {}
    const r = rest(reasoning, this.sentReasoning, 'reasoning')
    const c = rest(content, this.sentContent, 'content')
    if (r !== '') delta.reasoning_content = r
    if (c !== '') delta.content = c
    this.sentReasoning = reasoning
    this.sentContent = content
    return delta
  }
}

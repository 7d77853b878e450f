// The special tokens of the synthetic DeepSeek-style tokenizer, in id order.

/** Beginning of sequence (id 0). */
export const BOS_TOKEN = '<｜begin▁of▁sentence｜>'
/** End of sequence (id 1). */
export const EOS_TOKEN = '<｜end▁of▁sentence｜>'
/** Marks a user turn in the chat template (id 2). */
export const USER_TOKEN = '<｜User｜>'
/** Marks an assistant turn in the chat template (id 3). */
export const ASSISTANT_TOKEN = '<｜Assistant｜>'
/** Padding (id 4). */
export const PAD_TOKEN = '<｜▁pad▁｜>'

/** The named special tokens; their ids are their positions here. */
export const NAMED_SPECIAL_TOKENS: readonly string[] = [BOS_TOKEN, EOS_TOKEN, USER_TOKEN, ASSISTANT_TOKEN, PAD_TOKEN]

/** A filler special token for vocabulary slots the training text could not fill. */
export function reservedToken (n: number): string {
  return `<｜reserved_${n}｜>`
}

// Reused buffers for a forward pass's temporaries. A 512-token prefill chunk makes tens of
// megabytes per layer that live only inside one call (the queries, the streams' flat norm, the
// attention output); a fresh typed array costs a zero-fill and page faults on the main thread,
// serial work that no kernel thread shares. A slot keeps its largest buffer (bounded by the chunk
// size) and hands out views of it: a view is valid until the next scratch() of the same slot, so
// slots hold only arrays that no caller keeps and that one call uses once.

const slots = new Map<string, Float32Array>()

/** A Float32Array of `length` elements from `slot`'s buffer; its contents are left over from the last use. */
export function scratch (slot: string, length: number): Float32Array {
  let buf = slots.get(slot)
  if (buf === undefined || buf.length < length) {
    buf = new Float32Array(length)
    slots.set(slot, buf)
  }
  return buf.subarray(0, length)
}

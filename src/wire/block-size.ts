// The block size rule lives in src/config/block-size.ts (the front door's config uses it too, and
// config sits below wire); what capture, share and decode agree on is re-exported here.
export { checkBlockSize, checkPositiveBlockSize, DEFAULT_BLOCK_SIZE, parseBlockSize } from '../config/block-size.ts'

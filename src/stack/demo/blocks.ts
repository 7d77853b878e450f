// The block store's demo check lives with its decoder kind (src/decoders/ours/demo-blocks.ts);
// re-exported here for the protocols that gather and compare a prompt's blocks the same way.
export { gatherBlocks, presentKeys, promptBlockKeys, verifyPromptBlocks, type PromptBlocksCheck } from '../../decoders/ours/demo-blocks.ts'

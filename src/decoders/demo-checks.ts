// What `pd-bridge demo` found when it compared the bridged store with the native one: each kind's
// record fills the part its store has (docs/decoder-kinds.md, "demo").
import type { PromptBlocksCheck } from './ours/demo-blocks.ts'
import type { PromptStatesCheck } from './llama-cpp/demo-states.ts'

export type { PromptBlocksCheck, PromptStatesCheck }

/** The comparison's result, one field per kind of store. */
export interface DemoChecks {
  /** Blocks: verify-blocks over the prompt's blocks from both stores. */
  blocks?: PromptBlocksCheck
  /** The same comparison as a command the user can run again (blocks). */
  verifyCommand?: string
  /** llama.cpp: the sequence states at the bridged boundary, section by section. */
  states?: PromptStatesCheck
}

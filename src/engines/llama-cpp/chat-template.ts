// Chat rendering by llama.cpp itself: its own Jinja engine (llama.cpp's common/jinja, what
// llama-server renders a GGUF's tokenizer.chat_template with under --jinja), reached through
// node-llama-cpp's native AddonJinjaRenderer binding. node-llama-cpp's JinjaTemplateChatWrapper
// renders with @huggingface/jinja first (the engine ours uses) and falls back to this binding only
// when that fails, so the binding is called directly: an engine that shares no code with ours.
import { PdBridgeError } from '../../errors.ts'
import { templateContext, type ChatRenderOptions, type ChatTurn } from '../../model/tokenizer/index.ts'
import { loadLlamaCpu } from './runner.ts'

interface NativeRenderer { render: (variables: Record<string, unknown>) => string }
type NativeRendererClass = new (template: string) => NativeRenderer

/** A template compiled by llama.cpp's Jinja engine, rendered in apply_chat_template's context (templateContext). */
export class LlamaCppChatTemplate {
  private constructor (private readonly native: NativeRenderer, private readonly specials: Readonly<Record<string, string>>) {}

  /** Compile `template` with llama.cpp's engine (the CPU build node-llama-cpp ships). */
  static async compile (template: string, specials: Readonly<Record<string, string>>): Promise<LlamaCppChatTemplate> {
    const llama = await loadLlamaCpu() as unknown as { _bindings?: { AddonJinjaRenderer?: NativeRendererClass } }
    const Renderer = llama._bindings?.AddonJinjaRenderer
    if (Renderer === undefined) throw new PdBridgeError('llama.cpp chat template: this node-llama-cpp build has no native Jinja renderer (AddonJinjaRenderer)')
    return new LlamaCppChatTemplate(new Renderer(template), specials)
  }

  /** The prompt text llama.cpp renders for these messages. */
  render (messages: readonly ChatTurn[], options: ChatRenderOptions = {}): string {
    // The native binding converts plain JSON values only; a copy drops undefined fields and prototypes.
    return this.native.render(JSON.parse(JSON.stringify(templateContext(messages, options, this.specials))) as Record<string, unknown>)
  }
}

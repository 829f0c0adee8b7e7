// The hand-written shapes of src/api/chat.ts against the server's OpenAPI schema
// (src/api/schema.d.ts, generated): a server-side change that breaks the chat page fails the
// typecheck (`npm run build`) here.
//
// Two things the schema cannot say are stated here instead:
// - A field whose Python default is a `default_factory` (a conversation's character and
//   settings) has no `default` in the OpenAPI, so openapi-typescript marks it optional;
//   the server always sends it. A field with a plain default is marked required, which is
//   right for what the server sends and wrong for a request body, where it may be left out.
// - Where the server declares plain objects (`dict[str, Any]`: a turn's delta, a block's
//   source, the inspector's lore, cut and messages), the hand types name the models they
//   are dumped from; only whether they may be missing, null or a list is checked.
import { describe, expect, it } from 'vitest'
import type { components } from '../src/api/schema'
import {
  getMessagePrompt,
  listPipelines,
  type BackgroundListing,
  type BackgroundSnapshot,
  type CharacterListing,
  type CharacterSnapshot,
  type ChatMessage,
  type ChatView,
  type ContinueFromSummary,
  type Conversation,
  type ConversationSettings,
  type ConversationSummary,
  type ImportedChat,
  type MemoryProposal,
  type MessageState,
  type NewChat,
  type PromptBlock,
  type PromptInspection,
  type RagScope,
  type SendResult,
  type StopResult,
  type TreeNode,
  type TurnResult,
  type generate,
  type patchChat,
  type PromptDefaults,
  type TokenCounts,
} from '../src/api/chat'

type Schemas = components['schemas']

/** `T` less the fields `K` (unlike `Omit`, keeps the named fields of a type with an index
 * signature). */
type Without<T, K extends PropertyKey> = { [P in keyof T as P extends K ? never : P]: T[P] }

/** `T` with the `default_factory` fields `K` present, as the server sends them. */
type Sent<T, K extends keyof T> = Without<T, K> & Required<Pick<T, K>>

/** `T` with the fields `K`, which have server-side defaults, left out if the caller likes. */
type Defaulted<T, K extends keyof T> = Without<T, K> & Partial<Pick<T, K>>

/** A hand-named shape widened to the plain object the server declares (lists, null and
 * undefined kept as they are). */
type Plain<V> = V extends readonly (infer I)[] ? Plain<I>[] : V extends null | undefined ? V : V extends object ? { [key: string]: unknown } : V

/** `H` with its fields `K` as the server declares them: plain objects. */
type AsDeclared<H, K extends keyof H> = Without<H, K> & { [P in K]: Plain<H[P]> }

type SentConversation = Sent<Schemas['Conversation'], 'character' | 'settings'>
type WithConversation<T extends { conversation: unknown }> = Without<T, 'conversation'> & { conversation: SentConversation }

function accepts<T>(value: T): T {
  return value
}

describe('chat API shapes', () => {
  it('accept what the server declares it sends', () => {
    const checks = [
      (v: Schemas['MessageView']) => accepts<ChatMessage>(v),
      (v: SentConversation) => accepts<Conversation>(v),
      (v: Schemas['ConversationSettings']) => accepts<ConversationSettings>(v),
      (v: Schemas['RagScope']) => accepts<RagScope>(v),
      (v: Schemas['CharacterSnapshot']) => accepts<CharacterSnapshot>(v),
      (v: Schemas['BackgroundSnapshot']) => accepts<BackgroundSnapshot>(v),
      (v: Schemas['ConversationSummary']) => accepts<ConversationSummary>(v),
      (v: WithConversation<Schemas['ChatView']>) => accepts<ChatView>(v),
      (v: Schemas['TreeNode']) => accepts<TreeNode>(v),
      (v: Schemas['StateView']) => accepts<AsDeclared<MessageState, 'delta'>>(v),
      (v: Schemas['InspectorBlock']) => accepts<AsDeclared<PromptBlock, 'source'>>(v),
      (v: Without<Schemas['PromptInspector'], 'blocks'>) =>
        accepts<AsDeclared<Without<PromptInspection, 'blocks'>, 'lore' | 'cut' | 'messages'>>(v),
      (v: Schemas['CharacterListing']) => accepts<CharacterListing>(v),
      (v: Schemas['BackgroundPreset']) => accepts<BackgroundListing>(v),
      (v: Schemas['SendAccepted']) => accepts<SendResult>(v),
      (v: Schemas['TurnAccepted']) => accepts<TurnResult>(v),
      (v: Schemas['Stopped']) => accepts<StopResult>(v),
      (v: WithConversation<Schemas['ImportedChatView']>) => accepts<ImportedChat>(v),
      (v: Schemas['MemoryProposal']) => accepts<MemoryProposal>(v),
      (v: Schemas['TokenCounts']) => accepts<TokenCounts>(v),
      (v: Schemas['PromptDefaults']) => accepts<PromptDefaults>(v),
    ]
    expect(checks).toHaveLength(21)
  })

  it('send what the server declares it takes', () => {
    const checks = [
      (v: NewChat) => accepts<Schemas['NewChat']>(v),
      (v: Parameters<typeof patchChat>[1]) => accepts<Schemas['ChatPatch']>(v),
      (v: Parameters<typeof generate>[1]) => accepts<Defaulted<Schemas['GenerateBody'], 'reroll'>>(v),
      (v: ContinueFromSummary) => accepts<Defaulted<Schemas['ContinueBody'], 'order' | 'last_n_turns'>>(v),
    ]
    expect(checks).toHaveLength(4)
  })
})

describe('the prompt inspector call', () => {
  it('hands a block without a source on as the server sent it', async () => {
    const sent: PromptInspection = {
      blocks: [
        { id: 'main', kind: 'system', content: 'Be kind.', source: { kind: 'preset', label: 'Main prompt' } },
        { id: 'custom', kind: 'custom', content: 'From a pipeline.', source: null },
        { id: 'bare', kind: 'custom', content: 'No source at all.' },
      ],
      lore: [],
      cut: [],
      messages: [],
    }
    const fetchImpl = (async () => new Response(JSON.stringify(sent), { status: 200 })) as unknown as typeof fetch
    const shown = await getMessagePrompt('c1', 'm1', fetchImpl)
    expect(shown.blocks.map((b) => b.source)).toEqual([{ kind: 'preset', label: 'Main prompt' }, null, undefined])
  })
})

describe('the chat pipelines call', () => {
  const answer = (body: unknown) => (async () => new Response(JSON.stringify(body), { status: 200 })) as unknown as typeof fetch

  it("lists the built-ins first, then the project's workflows", async () => {
    const list = await listPipelines(
      answer({
        workflows: [
          { id: 'a-story', name: 'A story', description: '', nodeCount: 3, builtin: false },
          { id: 'chat-default', name: 'Chat (built-in)', description: '', nodeCount: 11, builtin: true },
          { id: 'st-mine', name: '', description: '', nodeCount: 11, builtin: false },
        ],
        broken: [],
      }),
    )
    expect(list).toEqual([
      { id: 'chat-default', name: 'Chat (built-in)', builtin: true },
      { id: 'a-story', name: 'A story', builtin: false },
      { id: 'st-mine', name: 'st-mine', builtin: false },
    ])
  })

  it('offers the built-in chat pipeline when the server does not list it', async () => {
    const list = await listPipelines(answer({ workflows: [{ id: 'mine', name: 'Mine', description: '', nodeCount: 1 }], broken: [] }))
    expect(list.map((p) => [p.id, p.builtin])).toEqual([
      ['chat-default', true],
      ['mine', false],
    ])
  })
})

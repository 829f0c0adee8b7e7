import type { ChatMessage, ChatView, Conversation, TreeNode } from '../src/api/chat'

export const CONV = 'c1'

export function conversation(over: Partial<Conversation> = {}): Conversation {
  return {
    id: CONV,
    project_id: 'default',
    title: 'Seraphina',
    created_at: 1,
    updated_at: 1,
    pointer: null,
    version: 1,
    character: { card: { name: 'Seraphina' } },
    background: null,
    settings: {
      pipeline: 'chat-default',
      user_name: 'User',
      persona: '',
      authors_note: '',
      authors_note_depth: 4,
      allow_regex_scripts: false,
      allow_html_scripts: false,
      director_enabled: true,
      rag_fallback_threshold: 3,
    },
    metadata: {},
    ...over,
  }
}

export function message(id: string, parent: string | null, over: Partial<ChatMessage> = {}): ChatMessage {
  return {
    id,
    conversation_id: CONV,
    parent_id: parent,
    role: 'assistant',
    name: 'Seraphina',
    content: `text of ${id}`,
    status: 'complete',
    sibling_index: 0,
    depth: 0,
    created_at: 1,
    sibling_count: 1,
    ...over,
  }
}

/** root a0 (assistant) → u1 (user) → a1 (assistant) → u2 → a2 … */
export function chain(n: number): ChatMessage[] {
  const out: ChatMessage[] = []
  let parent: string | null = null
  for (let i = 0; i < n; i++) {
    const id = `m${i}`
    out.push(message(id, parent, { role: i % 2 === 0 ? 'assistant' : 'user', depth: i }))
    parent = id
  }
  return out
}

export function view(messages: ChatMessage[], over: Partial<ChatView> = {}): ChatView {
  const last = messages[messages.length - 1]
  return { conversation: conversation({ pointer: last?.id ?? null }), messages, continuation: [], running: false, ...over }
}

export function node(id: string, parent: string | null, over: Partial<TreeNode> = {}): TreeNode {
  return {
    id,
    parent_id: parent,
    role: 'assistant',
    name: '',
    preview: id,
    status: 'complete',
    sibling_index: 0,
    depth: 0,
    on_path: false,
    ...over,
  }
}

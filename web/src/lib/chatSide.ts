// The chat page's side panels: the conversation's tree, the state at a message, a turn's
// prompt, the prompt manager (the pipeline's prompts and samplers), the books the chat's
// lore comes from, and the conversation's settings.

export type SideTab = 'tree' | 'state' | 'prompt' | 'manager' | 'lore' | 'settings'

export const SIDE_TABS: readonly SideTab[] = ['tree', 'state', 'prompt', 'manager', 'lore', 'settings']

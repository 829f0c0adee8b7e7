// The chat page's side panels: the conversation's tree, the state at a message, a turn's
// prompt, the prompt manager (the pipeline's prompts and samplers) and the conversation's
// settings.

export type SideTab = 'tree' | 'state' | 'prompt' | 'manager' | 'settings'

export const SIDE_TABS: readonly SideTab[] = ['tree', 'state', 'prompt', 'manager', 'settings']

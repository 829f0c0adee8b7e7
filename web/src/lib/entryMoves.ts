/** Moving an entry one place up or down: its button and its Alt+arrow key. */
export const MOVES = [
  { step: -1, key: 'ArrowUp', label: 'moveUp', testid: 'move-up', glyph: '↑' },
  { step: 1, key: 'ArrowDown', label: 'moveDown', testid: 'move-down', glyph: '↓' },
] as const

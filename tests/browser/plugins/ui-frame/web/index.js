// What a plugin author writes: the extension API from window, no bundler, no Vue import
// (a wrapper gets Vue's `h` next to the original component).
const api = window.storyloom.extensionApi

const results = {
  // Declared in permissions.ui.wrap and granted when enabled: applies.
  wrapSettings: api.ui.wrapComponent('ui:SettingsPanel', (original, { h }) => ({
    name: 'UiFrameSettings',
    inheritAttrs: false,
    setup(_, { attrs }) {
      return () => h('div', { 'data-testid': 'ui-frame-settings', style: 'outline: 2px solid teal' }, [h(original, attrs)])
    },
  })),
  // Declared too: a mark on every node of the workflow editor, by its type (props.data).
  wrapNodes: api.ui.wrapComponent('ui:BaseNode', (original, { h }) => ({
    name: 'UiFrameNode',
    inheritAttrs: false,
    setup(_, { attrs }) {
      return () => h('div', { 'data-testid': 'ui-frame-node', 'data-node-type': attrs.data?.nodeType ?? '' }, [h(original, attrs)])
    },
  })),
  // Not declared: refused, and the refusal shows in the plugin's status.
  wrapChat: api.ui.wrapComponent('ui:ChatMessage', (original) => original),
}

api.hooks.on('hook:client:auth:login', (payload) => {
  document.body.dataset.uiFrameLogin = payload.via
})
// Not declared in permissions.hooks: refused.
api.hooks.on('hook:client:settings:before-save', () => {
  throw new Error('an undeclared hook must never run')
})

document.body.dataset.uiFrameResults = JSON.stringify(results)

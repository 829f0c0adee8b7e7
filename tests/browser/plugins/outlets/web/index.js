// What a plugin written for ComfyTavern writes: the API under the seed's global name.
const api = window.ComfyTavern.extensionApi

const OUTLETS = [
  'layout:header:before-tabs',
  'layout:header:after-tabs',
  'layout:header:right',
  'editor:toolbar:left',
  'editor:toolbar:center',
  'editor:toolbar:right',
  'editor:canvas:overlay',
  'editor:statusbar:left',
  'editor:statusbar:right',
  'sidebar:icon-bar:tabs:before',
  'sidebar:icon-bar:tabs:after',
  'sidebar:icon-bar:bottom:before',
  'sidebar:panel:header[node]',
  'sidebar:panel:footer[node]',
  'sidebar:panel:header[run]',
  'sidebar:panel:footer[run]',
  'node:header:left',
  'node:header:right',
  'node:footer',
  'modal:footer',
]

for (const outlet of OUTLETS) {
  api.ui.registerOutletComponent(outlet, {
    mount(el, props) {
      const mark = document.createElement('span')
      mark.dataset.testid = 'outlet-mark'
      mark.dataset.outlet = outlet
      if (props.dialog) mark.dataset.dialog = String(props.dialog)
      if (props.workflowId) mark.dataset.workflow = String(props.workflowId)
      mark.textContent = '◆'
      el.append(mark)
    },
  })
}
document.body.dataset.outletsSameGlobal = String(window.ComfyTavern === window.storyloom)

// A node type's own UI, drawn as the body of each of its nodes: both spellings of the seed.
function nodeBody(el, props) {
  const body = document.createElement('span')
  body.dataset.testid = 'outlets-node-body'
  body.dataset.nodeId = String(props.nodeId)
  body.dataset.configKeys = String(Object.keys(props.config ?? {}).length)
  body.textContent = '▣ ' + props.nodeId
  el.append(body)
}
api.registerNodeUI('chat:TokenBudget', { mount: nodeBody })
api.nodes.registerUI('chat:Weaver', { mount: nodeBody })

// A page of its own, at /ext/outlets/report, and a navigation entry that opens it.
api.router.addRoute({
  path: 'report',
  title: '◆ Outlets',
  component: {
    mount(el, props) {
      const p = document.createElement('p')
      p.dataset.testid = 'outlets-page'
      p.dataset.path = String(props.path)
      p.textContent = '◆◆◆'
      el.append(p)
    },
  },
})
api.ui.addMenuItem({ label: '◆ Outlets', path: 'report' })

// A core service, read-only: reading works, writing throws, private members are hidden.
const connection = api.services.get('connection')
document.body.dataset.outletsWsState = typeof connection.state === 'string' ? 'read' : 'unread'
try {
  connection.state = 'hacked'
  document.body.dataset.outletsServiceWrite = 'allowed'
} catch {
  document.body.dataset.outletsServiceWrite = 'refused'
}
document.body.dataset.outletsServiceSend = typeof connection.send

// Enabling a plugin whose script tools ask for the network: the Tools page asks with an
// "Allow network access" box that is off unless ticked, sends the answer as grantNetwork,
// and says on the card whether the network was granted. Plugins that do not ask are
// enabled at once, with no grantNetwork sent.
import { flushPromises, mount } from '@vue/test-utils'
import { describe, expect, it } from 'vitest'
import type { PluginInfo } from '../src/api/plugins'
import PluginList from '../src/components/tools/PluginList.vue'
import { makeI18n } from '../src/i18n'
import { useFakeFetch } from './fakeFetch'
import { plugin } from './toolFixtures'

const server = useFakeFetch()
const q = (id: string) => `[data-testid="${id}"]`

const NETWORKED = plugin({
  name: 'bilibili-fetcher',
  displayName: 'Bilibili',
  riskReasons: ['connects to other machines'],
  declares: { nodes: [], tools: ['BilibiliFetch:getSubtitle'], workflows: [], hooks: [], ui: { wrap: [], inject: [], override: [] }, network: true },
  networkGranted: false,
})

function serve(plugins: PluginInfo[]): void {
  server.respond = (call) => {
    if (call.url === '/api/plugins/installed') return { status: 200, body: { plugins, problems: [] } }
    const m = /^\/api\/plugins\/([^/]+)\/enable$/.exec(call.url)
    if (m) {
      const p = plugins.find((x) => x.name === m[1])!
      const body = call.body as { grantNetwork?: boolean }
      Object.assign(p, { enabled: true, networkGranted: body.grantNetwork === true })
      return { status: 200, body: p }
    }
    return { status: 200, body: [] }
  }
}

async function mounted(lang: 'en' | 'zh' = 'en') {
  const wrapper = mount(PluginList, { global: { plugins: [makeI18n(lang)] } })
  await flushPromises()
  return wrapper
}

describe('granting network access when enabling a plugin', () => {
  it('asks first, with the box off, and enabling unticked sends grantNetwork false', async () => {
    serve([structuredClone(NETWORKED)])
    const wrapper = await mounted()
    await wrapper.get(q('plugin-enable-bilibili-fetcher')).trigger('click')
    await flushPromises()
    expect(server.calls.some((c) => c.url.endsWith('/enable'))).toBe(false)
    const dialog = wrapper.get(q('plugin-grant-dialog-bilibili-fetcher'))
    expect(dialog.text()).toContain('Allow network access')
    const box = wrapper.get(q('plugin-allow-network-bilibili-fetcher'))
    expect((box.element as HTMLInputElement).checked).toBe(false)
    await wrapper.get(q('plugin-grant-bilibili-fetcher')).trigger('click')
    await flushPromises()
    expect(server.calls.find((c) => c.url === '/api/plugins/bilibili-fetcher/enable')?.body).toEqual({ grantOverrides: false, grantNetwork: false })
    expect(wrapper.get(q('plugin-network-bilibili-fetcher')).text()).toContain('off (asked for, not granted)')
  })

  it('grants the network only when the box is ticked, and the card says so', async () => {
    serve([structuredClone(NETWORKED)])
    const wrapper = await mounted()
    await wrapper.get(q('plugin-enable-bilibili-fetcher')).trigger('click')
    await flushPromises()
    await wrapper.get(q('plugin-allow-network-bilibili-fetcher')).setValue(true)
    await wrapper.get(q('plugin-grant-bilibili-fetcher')).trigger('click')
    await flushPromises()
    expect(server.calls.find((c) => c.url === '/api/plugins/bilibili-fetcher/enable')?.body).toEqual({ grantOverrides: false, grantNetwork: true })
    expect(wrapper.get(q('plugin-bilibili-fetcher')).attributes('data-enabled')).toBe('true')
    expect(wrapper.get(q('plugin-network-bilibili-fetcher')).text()).toContain('allowed')
  })

  it('asks about overrides and the network in one dialog', async () => {
    const both = structuredClone(NETWORKED)
    both.declares.ui.override = ['ui:ChatComposer']
    serve([both])
    const wrapper = await mounted()
    await wrapper.get(q('plugin-enable-bilibili-fetcher')).trigger('click')
    await flushPromises()
    const dialog = wrapper.get(q('plugin-grant-dialog-bilibili-fetcher'))
    expect(dialog.text()).toContain('ui:ChatComposer')
    expect(dialog.text()).toContain('Allow network access')
    await wrapper.get(q('plugin-allow-network-bilibili-fetcher')).setValue(true)
    await wrapper.get(q('plugin-grant-bilibili-fetcher')).trigger('click')
    await flushPromises()
    expect(server.calls.find((c) => c.url.endsWith('/enable'))?.body).toEqual({ grantOverrides: true, grantNetwork: true })
  })

  it('enables a plugin that does not ask for the network at once, sending no grantNetwork', async () => {
    serve([plugin({ name: 'offline' })])
    const wrapper = await mounted()
    await wrapper.get(q('plugin-enable-offline')).trigger('click')
    await flushPromises()
    expect(server.calls.find((c) => c.url === '/api/plugins/offline/enable')?.body).toEqual({ grantOverrides: false })
    expect(wrapper.find(q('plugin-network-offline')).exists()).toBe(false)
  })

  it('shows the question in Chinese too', async () => {
    serve([structuredClone(NETWORKED)])
    const wrapper = await mounted('zh')
    await wrapper.get(q('plugin-enable-bilibili-fetcher')).trigger('click')
    await flushPromises()
    expect(wrapper.get(q('plugin-grant-dialog-bilibili-fetcher')).text()).toContain('允许访问网络')
  })
})

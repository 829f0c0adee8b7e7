import { createRouter, createWebHistory, type RouteRecordRaw } from 'vue-router'
import ChatPage from './views/ChatPage.vue'
import KnowledgePage from './views/KnowledgePage.vue'
import SettingsPageView from './views/SettingsPage.vue'
import { wrapPoint } from './extensions/extensionApi'

export const AREAS = ['chat', 'characters', 'knowledge', 'workflows', 'writing', 'tools'] as const
export type Area = (typeof AREAS)[number]

export const routes: RouteRecordRaw[] = [
  { path: '/', redirect: '/chat' },
  // The open conversation is part of the address, so a reload or a link keeps it.
  // The landing page: loaded with the app, not after it.
  { path: '/chat/:conversationId?', name: 'chat', component: ChatPage },
  // The open character is part of the address, so a reload or a link keeps it.
  { path: '/characters/:characterId?', name: 'characters', component: () => import('./views/CharactersPage.vue') },
  // The open knowledge base is part of the address, so a reload or a link keeps it.
  { path: '/knowledge/:kbId?', name: 'knowledge', component: KnowledgePage },
  // Likewise the open workflow. The canvas library is large: load it with the page.
  { path: '/workflows/:workflowId?', name: 'workflows', component: () => import('./views/WorkflowsPage.vue') },
  // The open book is part of the address, so a reload or a link keeps it.
  { path: '/writing/:bookId?', name: 'writing', component: () => import('./views/WritingPage.vue') },
  // The open tab is in the query (`?tab=plugins`).
  { path: '/tools', name: 'tools', component: () => import('./views/ToolsPage.vue') },
  // The seed's ui:SettingsPanel wrap point.
  { path: '/settings', name: 'settings', component: wrapPoint('ui:SettingsPanel', SettingsPageView) },
  // A plugin's own page (router.addRoute): fixed here, not added at run time, so a reload
  // of its address waits for the plugin instead of falling to the catch-all.
  { path: '/ext/:plugin/:page(.*)', name: 'plugin-page', component: () => import('./views/PluginPage.vue') },
  { path: '/:pathMatch(.*)*', redirect: '/chat' },
]

export function makeRouter() {
  return createRouter({ history: createWebHistory(import.meta.env.BASE_URL), routes })
}

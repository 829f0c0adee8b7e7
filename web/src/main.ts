import { createApp } from 'vue'
import App from './App.vue'
import { makeI18n } from './i18n'
import { makeRouter } from './router'
import { initializeExtensionApi } from './extensions/extensionApi'
import { loadExtensions } from './extensions/loader'
import './styles/tokens.css'
import './styles/base.css'

// The extension API is on `window` before any plugin script runs; plugins load after the
// app is up and never hold it back (a failing one is logged, the others load).
initializeExtensionApi()
createApp(App).use(makeRouter()).use(makeI18n()).mount('#app')
void loadExtensions()

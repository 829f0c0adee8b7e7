import { createApp } from 'vue'
import App from './App.vue'
import { makeI18n } from './i18n'
import { makeRouter } from './router'
import './styles/tokens.css'
import './styles/base.css'

createApp(App).use(makeRouter()).use(makeI18n()).mount('#app')

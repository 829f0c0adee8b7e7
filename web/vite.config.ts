/// <reference types="vitest/config" />
import { fileURLToPath } from 'node:url'
import vue from '@vitejs/plugin-vue'
import { defineConfig } from 'vite'

// The FastAPI server (storyloom/server) serves the built app from storyloom/server/static.
const outDir = fileURLToPath(new URL('../storyloom/server/static', import.meta.url))
const backend = 'http://127.0.0.1:8420'

export default defineConfig({
  plugins: [vue()],
  define: {
    // vue-i18n feature flags: Composition API only, no devtools in production.
    __VUE_I18N_FULL_INSTALL__: true,
    __VUE_I18N_LEGACY_API__: false,
    __INTLIFY_PROD_DEVTOOLS__: false,
  },
  build: {
    outDir,
    emptyOutDir: true,
  },
  server: {
    proxy: {
      '/api': { target: backend, changeOrigin: false },
      '/ws': { target: backend, ws: true },
      // Plugins' web parts are served by the server (enabled plugins only).
      '/plugins': { target: backend, changeOrigin: false },
    },
  },
  test: {
    environment: 'happy-dom',
    include: ['tests/**/*.test.ts'],
  },
})

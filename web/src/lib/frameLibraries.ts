// The libraries cards' frames assume (jQuery as `$`, lodash as `_`), inlined into each
// scripted frame: the frame has no network, so they cannot come from a CDN. Imported
// lazily (a chunk of its own), so the app's bundle does not carry them.
import jquery from 'jquery/dist/jquery.min.js?raw'
import lodash from 'lodash/lodash.min.js?raw'

function script(code: string): string {
  return `<script>${code.replace(/<\/script/gi, '<\\/script')}</script>`
}

export const FRAME_LIBRARIES = script(jquery) + script(lodash)

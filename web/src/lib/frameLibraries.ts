// The libraries cards' frames assume (jQuery as `$`, lodash as `_`), inlined into each
// scripted frame: the frame has no network, so they cannot come from a CDN. Imported
// lazily (a chunk of its own), so the app's bundle does not carry them.
import jquery from 'jquery/dist/jquery.min.js?raw'
import lodash from 'lodash/lodash.min.js?raw'

function script(code: string): string {
  return `<script>${code.replace(/<\/script/gi, '<\\/script')}</script>`
}

const JQUERY = script(jquery)
const LODASH = script(lodash)

/** The libraries a frame's code uses: jQuery where it names `$` or `jQuery`, lodash where
 * it names `_`; both where it loads scripts of its own (they may assume either). Parsing
 * them is most of a small status bar's start, so a frame that needs neither gets neither. */
export function librariesFor(code: string): string {
  const external = /<script\b[^>]*\bsrc\s*=/i.test(code)
  const wantsJquery = external || /(?:^|[^\w$.])(?:\$|jQuery)\s*[(.]/.test(code)
  const wantsLodash = external || /(?:^|[^\w$.])_\s*\.\s*[A-Za-z]/.test(code)
  return (wantsJquery ? JQUERY : '') + (wantsLodash ? LODASH : '')
}

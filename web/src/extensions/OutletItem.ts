// One unit of an outlet, fenced: an error thrown while it renders or updates is logged with
// its plugin's name and the unit is dropped (`failed`), so a broken plugin never takes the
// page around it down.
import { type Component, defineComponent, h, onErrorCaptured, type PropType } from 'vue'
import { isVanilla, type OutletEntry } from './extensionApi'
import VanillaHost from './VanillaHost.vue'

export default defineComponent({
  name: 'OutletItem',
  props: {
    entry: { type: Object as PropType<OutletEntry>, required: true },
    outlet: { type: String, required: true },
    unitProps: { type: Object as PropType<Record<string, unknown>>, default: () => ({}) },
  },
  emits: ['failed'],
  setup(props, { emit }) {
    onErrorCaptured((exc) => {
      console.error(`[storyloom extensions] ${props.entry.plugin ?? 'a plugin'}: its component in outlet ${props.outlet} failed`, exc)
      emit('failed', props.entry.id)
      return false
    })
    return () => {
      const c = props.entry.component
      if (isVanilla(c)) return h(VanillaHost, { unit: c, props: props.unitProps, plugin: props.entry.plugin, outlet: props.outlet })
      return h(c as Component, { ...props.unitProps })
    }
  },
})

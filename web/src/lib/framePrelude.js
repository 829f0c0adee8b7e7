// The bridge's half inside a card's frame: the first script of every frame that may run
// scripts (see frameBridge.ts, which inlines this file with the frame's config as the
// argument). It offers the Tavern Helper functions status bars and front-end cards call,
// answered from the data the chat page put in the config and, for writes and sending,
// by the page over postMessage. The page checks every request: this side only asks.
//
// The frame has an opaque origin: its own localStorage would throw, so cards get storage
// that lives in memory for the frame's life (never the app's).
;(function (cfg) {
  'use strict'
  var CALL = 'storyloom:call'
  var parentWindow = window.parent
  var pending = new Map()
  var nextCall = 1
  var listeners = new Map()
  var state = {
    messages: cfg.messages,
    lastMessageId: cfg.lastMessageId,
    data: cfg.data, // message index (as text) → message-scope variables
    chat: cfg.chat,
    global: cfg.global,
    character: cfg.character,
    script: {},
  }

  function clone(value) {
    return value === undefined ? undefined : JSON.parse(JSON.stringify(value))
  }

  function post(message) {
    message.frame = cfg.frame
    message.nonce = cfg.nonce
    parentWindow.postMessage(message, '*')
  }

  function call(fn, args) {
    return new Promise(function (resolve, reject) {
      var id = nextCall++
      pending.set(id, { resolve: resolve, reject: reject })
      post({ type: CALL, id: id, fn: fn, args: clone(args) })
    })
  }

  function emitLocal(name, args) {
    var set = listeners.get(name)
    if (!set) return
    Array.from(set).forEach(function (entry) {
      if (entry.once) set.delete(entry)
      try {
        var out = entry.fn.apply(null, args)
        if (out && typeof out.catch === 'function') out.catch(function (e) { console.error(e) })
      } catch (e) {
        console.error(e)
      }
    })
  }

  window.addEventListener('message', function (event) {
    if (event.source !== parentWindow) return
    var data = event.data
    if (!data || typeof data !== 'object') return
    if (data.type === 'storyloom:reply') {
      var waiting = pending.get(data.id)
      if (!waiting) return
      pending.delete(data.id)
      if (data.ok) waiting.resolve(data.value)
      else waiting.reject(new Error(String(data.error)))
    } else if (data.type === 'storyloom:sync') {
      if (data.messages) state.messages = data.messages
      if (typeof data.lastMessageId === 'number') state.lastMessageId = data.lastMessageId
      if (data.data) Object.keys(data.data).forEach(function (k) { state.data[k] = data.data[k] })
      if (data.chat) state.chat = data.chat
    } else if (data.type === 'storyloom:event') {
      emitLocal(String(data.name), Array.isArray(data.args) ? data.args : [])
    }
  })

  // -- reading --------------------------------------------------------------------------

  function messageIndex(id) {
    if (id === undefined || id === null || id === 'latest') return state.lastMessageId
    if (typeof id === 'string') {
      var text = substitudeMacros(id).trim()
      id = Number(text)
    }
    if (typeof id !== 'number' || !Number.isFinite(id)) throw new Error('not a message id: ' + id)
    return id < 0 ? state.lastMessageId + 1 + id : id
  }

  function range(value) {
    if (typeof value === 'number') {
      var one = messageIndex(value)
      return [one, one]
    }
    var text = substitudeMacros(String(value)).trim()
    var match = /^(-?\d+)\s*-\s*(-?\d+)$/.exec(text)
    if (match) return [messageIndex(Number(match[1])), messageIndex(Number(match[2]))]
    var single = messageIndex(text)
    return [single, single]
  }

  function messageData(index) {
    var data = state.data[String(index)]
    return data ? clone(data) : {}
  }

  function getChatMessages(value, option) {
    option = option || {}
    var bounds = range(value)
    var role = option.role || 'all'
    var hide = option.hide_state || 'all'
    return state.messages
      .filter(function (m) {
        if (m.message_id < bounds[0] || m.message_id > bounds[1]) return false
        if (role !== 'all' && m.role !== role) return false
        if (hide === 'hidden' && !m.is_hidden) return false
        if (hide === 'unhidden' && m.is_hidden) return false
        return true
      })
      .map(function (m) {
        var out = clone(m)
        out.data = messageData(m.message_id)
        if (option.include_swipes) {
          out.swipe_id = 0
          out.swipes = [out.message]
          out.swipes_data = [out.data]
        }
        return out
      })
  }

  function scopeOf(option) {
    return (option && option.type) || 'chat'
  }

  function getVariables(option) {
    var type = scopeOf(option)
    if (type === 'message') return messageData(messageIndex(option.message_id))
    if (type === 'chat') return clone(state.chat)
    if (type === 'global') return clone(state.global)
    if (type === 'character') return clone(state.character)
    if (type === 'script') return clone(state.script)
    throw new Error('unknown variable type: ' + type)
  }

  function substitudeMacros(text) {
    return String(text)
      .replace(/\{\{lastMessageId\}\}/g, String(state.lastMessageId))
      .replace(/\{\{char\}\}/gi, cfg.charName)
      .replace(/\{\{user\}\}/gi, cfg.userName)
  }

  // -- writing (the page allows it or refuses) -------------------------------------------

  function replaceVariables(variables, option) {
    var type = scopeOf(option)
    if (type === 'script') {
      state.script = clone(variables)
      return Promise.resolve()
    }
    var index = type === 'message' ? messageIndex(option.message_id) : state.lastMessageId
    return call('replaceVariables', { type: type, message_id: index, variables: variables }).then(function (saved) {
      if (type === 'message') state.data[String(index)] = saved
      if (type === 'chat' || index === state.lastMessageId) state.chat = saved
    })
  }

  function isObject(value) {
    return value !== null && typeof value === 'object' && !Array.isArray(value)
  }

  function merge(target, source) {
    Object.keys(source).forEach(function (key) {
      if (isObject(target[key]) && isObject(source[key])) merge(target[key], source[key])
      else target[key] = clone(source[key])
    })
    return target
  }

  function updateVariablesWith(updater, option) {
    var variables = getVariables(option)
    var out = updater(variables)
    var apply = function (result) {
      var next = result === undefined ? variables : result
      return replaceVariables(next, option).then(function () { return next })
    }
    return out && typeof out.then === 'function' ? out.then(apply) : apply(out)
  }

  function insertOrAssignVariables(variables, option) {
    return updateVariablesWith(function (old) { return merge(old, variables) }, option)
  }

  function insertVariables(variables, option) {
    return updateVariablesWith(function (old) { return merge(clone(variables), old) }, option)
  }

  function deleteVariable(path, option) {
    var removed = false
    return updateVariablesWith(function (old) {
      var keys = String(path).split('.')
      var holder = old
      for (var i = 0; i < keys.length - 1; i++) {
        holder = holder && holder[keys[i]]
      }
      if (holder && Object.prototype.hasOwnProperty.call(holder, keys[keys.length - 1])) {
        delete holder[keys[keys.length - 1]]
        removed = true
      }
      return old
    }, option).then(function (variables) { return { variables: variables, delete_occurred: removed } })
  }

  function createChatMessages(messages) {
    var list = Array.isArray(messages) ? messages : [messages]
    var text = list
      .filter(function (m) { return m && (m.role === undefined || m.role === 'user') })
      .map(function (m) { return String(m.message || '') })
      .join('\n')
    return call('sendMessage', { text: text })
  }

  function triggerSlash(command) {
    var match = /^\s*\/send\s+([\s\S]*?)\s*(?:\|\s*\/trigger\s*)?$/.exec(String(command))
    if (match) return call('sendMessage', { text: match[1] })
    return Promise.reject(new Error('storyloom runs no slash commands from a frame: ' + String(command).slice(0, 40)))
  }

  // -- events ---------------------------------------------------------------------------

  function eventOn(name, fn) {
    if (!listeners.has(name)) listeners.set(name, new Set())
    listeners.get(name).add({ fn: fn, once: false })
    return { stop: function () { eventRemoveListener(name, fn) } }
  }

  function eventOnce(name, fn) {
    if (!listeners.has(name)) listeners.set(name, new Set())
    listeners.get(name).add({ fn: fn, once: true })
    return { stop: function () { eventRemoveListener(name, fn) } }
  }

  function eventRemoveListener(name, fn) {
    var set = listeners.get(name)
    if (!set) return
    Array.from(set).forEach(function (entry) { if (entry.fn === fn) set.delete(entry) })
  }

  function eventEmit(name) {
    emitLocal(name, Array.prototype.slice.call(arguments, 1))
    return Promise.resolve()
  }

  var tavern_events = {
    MESSAGE_RECEIVED: 'message_received',
    MESSAGE_SENT: 'message_sent',
    MESSAGE_UPDATED: 'message_updated',
    MESSAGE_SWIPED: 'message_swiped',
    MESSAGE_DELETED: 'message_deleted',
    CHAT_CHANGED: 'chat_id_changed',
    GENERATION_STARTED: 'generation_started',
    GENERATION_ENDED: 'generation_ended',
    CHARACTER_MESSAGE_RENDERED: 'character_message_rendered',
    USER_MESSAGE_RENDERED: 'user_message_rendered',
  }

  var Mvu = {
    events: {
      VARIABLE_INITIALIZED: 'mag_variable_initiailized',
      VARIABLE_UPDATE_STARTED: 'mag_variable_update_started',
      VARIABLE_UPDATED: 'mag_variable_updated',
      VARIABLE_UPDATE_ENDED: 'mag_variable_update_ended',
    },
    getMvuData: function (option) { return getVariables(option || { type: 'message' }) },
    replaceMvuData: function (data, option) { return replaceVariables(data, option || { type: 'message' }) },
  }

  function errorCatched(fn) {
    return function () {
      try {
        var out = fn.apply(this, arguments)
        if (out && typeof out.catch === 'function') return out.catch(function (e) { console.error(e) })
        return out
      } catch (e) {
        console.error(e)
      }
    }
  }

  function memoryStorage() {
    var items = new Map()
    return {
      get length() { return items.size },
      key: function (i) { return Array.from(items.keys())[i] ?? null },
      getItem: function (k) { return items.has(String(k)) ? items.get(String(k)) : null },
      setItem: function (k, v) { items.set(String(k), String(v)) },
      removeItem: function (k) { items.delete(String(k)) },
      clear: function () { items.clear() },
    }
  }

  function note(kind) {
    return function () { console.info.apply(console, ['[' + kind + ']'].concat(Array.from(arguments))) }
  }

  var offered = {
    getChatMessages: getChatMessages,
    getCurrentMessageId: function () { return cfg.messageId === null ? state.lastMessageId : cfg.messageId },
    getLastMessageId: function () { return state.lastMessageId },
    getVariables: getVariables,
    replaceVariables: replaceVariables,
    updateVariablesWith: updateVariablesWith,
    insertOrAssignVariables: insertOrAssignVariables,
    insertVariables: insertVariables,
    deleteVariable: deleteVariable,
    createChatMessages: createChatMessages,
    triggerSlash: triggerSlash,
    eventOn: eventOn,
    eventOnce: eventOnce,
    eventRemoveListener: eventRemoveListener,
    eventEmit: eventEmit,
    tavern_events: tavern_events,
    getCharData: function () { return clone(cfg.card) },
    substitudeMacros: substitudeMacros,
    waitGlobalInitialized: function () { return Promise.resolve() },
    errorCatched: errorCatched,
    Mvu: Mvu,
    toastr: { info: note('info'), success: note('success'), warning: note('warning'), error: note('error'), clear: function () {} },
  }
  Object.keys(offered).forEach(function (name) { window[name] = offered[name] })
  ;['localStorage', 'sessionStorage'].forEach(function (name) {
    try {
      Object.defineProperty(window, name, { value: memoryStorage(), configurable: true })
    } catch (e) {
      console.warn('no ' + name + ' in this frame')
    }
  })

  // The page's own height: the root's box (its scrollHeight is never less than the
  // frame's, so a frame could grow but never shrink), or the body's overflow if taller.
  function sendHeight() {
    var body = document.body
    var height = Math.max(document.documentElement.getBoundingClientRect().height, body ? body.scrollHeight : 0)
    post({ type: 'storyloom:height', height: height })
  }
  addEventListener('load', sendHeight)
  // Says this document (the one the page made) finished loading: a load of the frame
  // without it is another document, the frame having navigated away.
  addEventListener('load', function () {
    post({ type: 'storyloom:loaded' })
  })
  addEventListener('DOMContentLoaded', function () {
    sendHeight()
    if (window.ResizeObserver) new ResizeObserver(sendHeight).observe(document.documentElement)
  })
})

// storyloom's EJS runtime: runs in the sandboxed script worker (quickjs-ng) before a
// turn's templates, which come in ctx.templates already compiled to function bodies
// (storyloom/chat/prompt/ejs_compiler.py). Nothing here reaches the host: the templates see
// the turn's variables as plain data, and ctx.results is all that goes back.
//
// ctx = {scopes: {message, global, character, initial}, names: {user, char}, seed,
//        message: {...} | null, states: [{...variables at a message}],
//        card: {name, description, ...} | null (getchar),
//        worldinfo: [{book, book_name, id, title, text, code?, error?}] | undefined (getwi),
//        templates: [{name, kind: "text"|"condition", code, state?: index, message?, seed?}]}
// ctx.results[i] = {output, value, error, line, writes: [{scope, key, value, deleted}]}
(function () {
  "use strict";
  const g = globalThis;
  const S = ctx.scopes;
  const WRITABLE = { message: "message", local: "message", chat: "message", global: "global", cache: "cache" };
  const READABLE = { ...WRITABLE, character: "character", initial: "initial" };
  S.cache = {};
  // Math.random seeded from the turn (mulberry32), so a turn rebuilt from the same
  // stored data renders the same text; a swipe has a seed of its own.
  let seed = (Number(ctx.seed) >>> 0) || 0x9e3779b9;
  Math.random = function () {
    seed = (seed + 0x6d2b79f5) >>> 0;
    let t = seed;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  S.initial = S.initial || {};
  let touched = null;

  // ---- a small lodash subset (the functions cards call) -------------------------------
  const isObjectLike = (v) => v !== null && typeof v === "object";
  const isPlain = (v) => isObjectLike(v) && !Array.isArray(v);
  // "a.b[0]['c d']" as ["a", "b", "0", "c d"] (lodash's path syntax, the common part).
  const toPath = (path) => {
    if (Array.isArray(path)) return path.map(String);
    const text = String(path), out = [];
    let cur = "", i = 0;
    while (i < text.length) {
      const c = text[i];
      if (c === ".") { out.push(cur); cur = ""; i++; continue; }
      if (c === "[") {
        if (cur !== "" || (i > 0 && text[i - 1] !== "." && text[i - 1] !== "]")) out.push(cur);
        cur = "";
        const close = text.indexOf("]", i);
        if (close < 0) { cur = text.slice(i); break; }
        let inner = text.slice(i + 1, close);
        if (/^(["']).*\1$/.test(inner)) inner = inner.slice(1, -1);
        out.push(inner);
        i = close + 1;
        if (text[i] === ".") i++;
        continue;
      }
      cur += c;
      i++;
    }
    if (cur !== "" || text === "" || text.endsWith(".")) out.push(cur);
    return out;
  };
  const get = (obj, path, fallback) => {
    const keys = toPath(path);
    let cur = obj;
    for (const k of keys) {
      if (cur === null || cur === undefined) return fallback;
      cur = cur[k];
    }
    return cur === undefined ? fallback : cur;
  };
  const has = (obj, path) => {
    const keys = toPath(path);
    let cur = obj;
    for (const k of keys) {
      if (!isObjectLike(cur) || !Object.prototype.hasOwnProperty.call(cur, k)) return false;
      cur = cur[k];
    }
    return keys.length > 0;
  };
  const set = (obj, path, value) => {
    const keys = toPath(path);
    let cur = obj;
    for (let i = 0; i < keys.length - 1; i++) {
      const k = keys[i];
      if (!isObjectLike(cur[k])) cur[k] = /^\d+$/.test(keys[i + 1]) ? [] : {};
      cur = cur[k];
    }
    cur[keys[keys.length - 1]] = value;
    return obj;
  };
  const unset = (obj, path) => {
    const keys = toPath(path);
    const parent = keys.length > 1 ? get(obj, keys.slice(0, -1)) : obj;
    if (!isObjectLike(parent)) return true;
    return delete parent[keys[keys.length - 1]];
  };
  const cloneDeep = (v) => (v === undefined ? undefined : JSON.parse(JSON.stringify(v)));
  const isEqual = (a, b) => {
    if (a === b) return true;
    if (!isObjectLike(a) || !isObjectLike(b) || Array.isArray(a) !== Array.isArray(b)) return false;
    const ka = Object.keys(a), kb = Object.keys(b);
    return ka.length === kb.length && ka.every((k) => isEqual(a[k], b[k]));
  };
  const merge = (target, ...sources) => {
    for (const src of sources) {
      if (!isObjectLike(src)) continue;
      for (const k of Object.keys(src)) {
        const v = src[k];
        if (isObjectLike(v) && isObjectLike(target[k])) merge(target[k], v);
        else if (v !== undefined) target[k] = isObjectLike(v) ? cloneDeep(v) : v;
      }
    }
    return target;
  };
  const values = (o) => (isObjectLike(o) ? Object.values(o) : []);
  const collection = (c) => (Array.isArray(c) ? c : values(c));
  const iteratee = (f) => {
    if (typeof f === "function") return f;
    if (f === undefined || f === null) return (x) => x;
    if (Array.isArray(f)) return (x) => isEqual(get(x, f[0]), f[1]);
    if (isObjectLike(f)) return (x) => Object.keys(f).every((k) => isEqual(get(x, k), f[k]));
    return (x) => get(x, f);
  };
  const toNumber = (v) => (typeof v === "number" ? v : v === null || v === "" ? 0 : Number(v));
  const round = (n, digits = 0) => {
    const p = Math.pow(10, digits);
    return Math.round(toNumber(n) * p) / p;
  };
  const _ = {
    get, has, set, unset, cloneDeep, isEqual, merge, values, toNumber, round,
    keys: (o) => (isObjectLike(o) ? Object.keys(o) : []),
    isNumber: (v) => typeof v === "number",
    isString: (v) => typeof v === "string",
    isArray: Array.isArray,
    isObject: (v) => v !== null && (typeof v === "object" || typeof v === "function"),
    isPlainObject: isPlain,
    isNil: (v) => v === null || v === undefined,
    isEmpty: (v) => v === null || v === undefined || (typeof v === "string" || Array.isArray(v) ? v.length === 0 : isObjectLike(v) ? Object.keys(v).length === 0 : true),
    includes: (c, v) => (typeof c === "string" ? c.includes(v) : collection(c).some((x) => isEqual(x, v))),
    filter: (c, f) => collection(c).filter(iteratee(f)),
    map: (c, f) => (Array.isArray(c) ? c.map(iteratee(f)) : Object.keys(c || {}).map((k) => iteratee(f)(c[k], k, c))),
    find: (c, f) => collection(c).find(iteratee(f)),
    forEach: (c, f) => { if (Array.isArray(c)) c.forEach(f); else Object.keys(c || {}).forEach((k) => f(c[k], k, c)); return c; },
    some: (c, f) => collection(c).some(iteratee(f)),
    every: (c, f) => collection(c).every(iteratee(f)),
    size: (c) => (typeof c === "string" ? c.length : collection(c).length),
    sum: (a) => collection(a).reduce((s, x) => s + x, 0),
    sumBy: (a, f) => collection(a).reduce((s, x) => s + iteratee(f)(x), 0),
    max: (a) => (collection(a).length ? collection(a).reduce((m, x) => (x > m ? x : m)) : undefined),
    min: (a) => (collection(a).length ? collection(a).reduce((m, x) => (x < m ? x : m)) : undefined),
    clamp: (n, lo, hi) => (hi === undefined ? Math.min(n, lo) : Math.min(Math.max(n, lo), hi)),
    random: (lo = 0, hi = 1, floating = false) => {
      if (hi < lo) [lo, hi] = [hi, lo];
      const r = lo + Math.random() * (hi - lo);
      return floating || !Number.isInteger(lo) || !Number.isInteger(hi) ? r : Math.floor(lo + Math.random() * (hi - lo + 1));
    },
    sample: (c) => { const a = collection(c); return a.length ? a[Math.floor(Math.random() * a.length)] : undefined; },
    range: (start, end, step) => {
      if (end === undefined) { end = start; start = 0; }
      step = step === undefined ? (end < start ? -1 : 1) : step;
      const out = [];
      if (step === 0) return out;
      for (let i = start; step > 0 ? i < end : i > end; i += step) out.push(i);
      return out;
    },
    first: (a) => (a && a.length ? a[0] : undefined),
    head: (a) => (a && a.length ? a[0] : undefined),
    last: (a) => (a && a.length ? a[a.length - 1] : undefined),
    uniq: (a) => [...new Set(a || [])],
    sortBy: (c, f) => {
      const fs = (Array.isArray(f) ? f : [f]).map(iteratee);
      return collection(c).slice().sort((x, y) => {
        for (const fn of fs) { const a = fn(x), b = fn(y); if (a < b) return -1; if (a > b) return 1; }
        return 0;
      });
    },
    groupBy: (c, f) => {
      const fn = iteratee(f), out = {};
      for (const x of collection(c)) { const k = fn(x); (out[k] = out[k] || []).push(x); }
      return out;
    },
    pick: (o, ...ks) => { const out = {}; for (const k of ks.flat()) if (has(o, k)) set(out, k, get(o, k)); return out; },
    omit: (o, ...ks) => { const out = { ...(o || {}) }; for (const k of ks.flat()) delete out[k]; return out; },
    toString: (v) => (v === null || v === undefined ? "" : String(v)),
    trim: (s) => String(s ?? "").trim(),
  };

  // ---- variables ---------------------------------------------------------------------
  const scopeOf = (options, fallback, table) => {
    const name = options && options.scope !== undefined ? String(options.scope) : fallback;
    if (name === "character" && table === WRITABLE)
      throw new Error("the character scope is read only (the card's variables)");
    const real = table[name];
    if (!real) throw new Error("the variable scope '" + name + "' is not supported");
    return real;
  };
  const merged = () => merge(merge(merge({}, S.character), S.global), S.message);
  g.variables = merged();
  const touch = (scope, key) => {
    const top = toPath(key)[0];
    if (touched && top !== undefined) touched.set(scope + "\u0000" + top, [scope, top]);
  };
  const read = (key, options) => {
    if (options && options.scope !== undefined) return get(S[scopeOf(options, "", READABLE)], key);
    return get(g.variables, key);
  };
  g.getvar = function (key, options = {}) {
    const value = read(key, options);
    if (value !== undefined && options.index !== undefined && Array.isArray(value)) return value[options.index];
    return value === undefined ? options.defaults : value;
  };
  g.setvar = function (key, value, options = {}) {
    const scope = scopeOf(options, "message", WRITABLE);
    const target = S[scope];
    const old = get(target, key);
    const flags = options.flags || "n";
    if ((flags === "nx" || flags === "nxs") && old !== undefined) return undefined;
    if ((flags === "xx" || flags === "xxs") && old === undefined) return undefined;
    let next = value;
    if (options.merge && isObjectLike(old) && isObjectLike(value)) next = merge(cloneDeep(old), value);
    if (options.index !== undefined && Array.isArray(old)) { next = old.slice(); next[options.index] = value; }
    set(target, key, next);
    if (scope !== "cache") touch(scope, key);
    g.variables = merged();
    return options.results === "old" ? old : next;
  };
  const step = (sign) => function (key, value = 1, options = {}) {
    const scope = scopeOf(options, "message", WRITABLE);
    const old = get(S[scope], key);
    return g.setvar(key, toNumber(old === undefined ? 0 : old) + sign * toNumber(value), { ...options, scope });
  };
  g.incvar = step(1);
  g.decvar = step(-1);
  g.delvar = function (key, options = {}) {
    const scope = scopeOf(options, "message", WRITABLE);
    unset(S[scope], key);
    if (scope !== "cache") touch(scope, key);
    g.variables = merged();
  };
  for (const [suffix, scope] of [["Local", "local"], ["Global", "global"], ["Message", "message"]]) {
    g["get" + suffix + "Var"] = (k, o = {}) => g.getvar(k, { ...o, scope });
    g["set" + suffix + "Var"] = (k, v, o = {}) => g.setvar(k, v, { ...o, scope });
    g["inc" + suffix + "Var"] = (k, v, o = {}) => g.incvar(k, v, { ...o, scope });
    g["dec" + suffix + "Var"] = (k, v, o = {}) => g.decvar(k, v, { ...o, scope });
  }
  g._ = _;
  g.user = (ctx.names && ctx.names.user) || "";
  g.char = (ctx.names && ctx.names.char) || "";
  g.userName = g.user;
  g.charName = g.char;
  // The message a template is in (a displayed one, a chat message of the prompt): each
  // template may bring its own, with the variables as they were at it (ctx.states).
  const turnMessage = S.message;
  const enter = (t) => {
    if (t.seed !== undefined && t.seed !== null) seed = (Number(t.seed) >>> 0) || 0x9e3779b9;
    const message = t.message || ctx.message || {};
    g.is_user = !!message.is_user;
    g.is_system = !!message.is_system;
    g.message_id = message.id === undefined ? null : message.id;
    const own = t.state === undefined || t.state === null ? turnMessage : ctx.states[t.state];
    if (S.message !== own) {
      S.message = own;
      g.variables = merged();
    }
  };

  // ---- the turn's data: other entries, the card, definitions ---------------------------
  // getwi([book,] title, data): another lore entry's text, rendered as a template (with
  // `data`'s keys as names); "" when there is none. Synchronous here (awaiting it works).
  const WI = ctx.worldinfo;
  let wiDepth = 0;
  const sameText = (want, value) =>
    want instanceof RegExp ? want.test(value) : String(want) === value;
  const wiFind = (book, title) => {
    for (const e of WI) {
      if (book && e.book !== book && e.book_name !== book) continue;
      if (typeof title === "number" ? e.id === String(title) : sameText(title, e.title) || sameText(title, e.id)) return e;
    }
    return null;
  };
  g.getwi = g.getWorldInfo = function (bookOrTitle, titleOrData, data) {
    let book = "", title = bookOrTitle, extra = titleOrData;
    if (!(titleOrData === undefined || titleOrData === null || isPlain(titleOrData))) {
      book = bookOrTitle || "";
      title = titleOrData;
      extra = data;
    }
    if (!WI) throw new Error("getwi: no lore books are loaded here");
    const entry = wiFind(book, title);
    if (!entry) return "";
    if (entry.error) throw new Error("getwi '" + entry.title + "': " + entry.error);
    if (entry.code === undefined) return entry.text;
    if (wiDepth >= 8) throw new Error("getwi: entries read each other more than 8 deep");
    const out = [];
    const append = (v) => { if (v !== null && v !== undefined) out.push(String(v)); };
    const fn = (0, eval)("(function (__append, __raw, __escape, print, __data) { with (__data) {" + entry.code + "\n} })");
    wiDepth++;
    try {
      fn(append, raw, escape, (...args) => { for (const a of args) append(a); }, isPlain(extra) ? extra : {});
    } finally {
      wiDepth--;
    }
    return out.join("");
  };
  // getchar(name, template, data): the card's definition in ST-Prompt-Template's layout;
  // getCharData(name): its fields. Only the chat's own card is here.
  const CARD = ctx.card || null;
  const isChar = (name) =>
    CARD !== null && (name === undefined || name === null || name === "" || sameText(name, CARD.name));
  g.getCharData = (name) => (isChar(name) ? cloneDeep(CARD) : null);
  g.getchar = g.getChara = function (name, template) {
    if (template !== undefined && template !== null)
      throw new Error("getchar: a layout template of its own is not supported");
    if (!isChar(name) || !CARD.name) return "";
    const lines = ["<" + CARD.name + ">"];
    if (CARD.system_prompt) lines.push("System: " + CARD.system_prompt);
    lines.push("name: " + CARD.name);
    if (CARD.personality) lines.push("personality: " + CARD.personality);
    if (CARD.description) lines.push("description: " + CARD.description);
    if (CARD.mes_example) lines.push("example:", CARD.mes_example);
    if (CARD.depth_prompt) lines.push("System: " + CARD.depth_prompt);
    lines.push("</" + CARD.name + ">");
    return lines.join("\n");
  };
  // define(name, value, merge): a name every later template of the batch sees.
  g.define = function (name, value, mergeIt = false) {
    const key = String(name);
    if (mergeIt && isObjectLike(g[key]) && isObjectLike(value)) merge(g[key], value);
    else g[key] = value;
  };
  // SillyTavern's functions that reach outside the turn's data: named when called.
  for (const name of [
    "execute", "getqr", "getQuickReply", "getpreset", "getPresetPrompt", "activewi",
    "activateWorldInfo", "activateRegex", "injectPrompt", "getPromptsInjected",
    "hasPromptsInjected", "evalTemplate", "getChatMessage", "getChatMessages",
  ]) {
    g[name] = function () {
      throw new Error(name + " is not available in storyloom's templates (it reaches outside the turn's data)");
    };
  }

  // An [InitialVariables] entry written as a template: its output is the JSON object of
  // starting variables; the keys the turn's variables lack are filled from it.
  const fillMissing = (target, source, top) => {
    for (const k of Object.keys(source)) {
      if (!(k in target)) {
        target[k] = cloneDeep(source[k]);
        if (top) touch("message", k);
      } else if (isPlain(target[k]) && isPlain(source[k])) {
        fillMissing(target[k], source[k], false);
        if (top) touch("message", k);
      }
    }
  };
  const startWith = (output) => {
    let data;
    try {
      data = JSON.parse(output);
    } catch (e) {
      throw new Error("its output is not JSON: " + describe(e));
    }
    if (!isPlain(data)) throw new Error("its output is not a JSON object of variables");
    fillMissing(S.initial, data, false);
    fillMissing(S.message, data, true);
    g.variables = merged();
  };

  // ---- the run -----------------------------------------------------------------------
  const HTML = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&#34;", "'": "&#39;" };
  const raw = (v) => v;
  const escape = (v) => (v === null || v === undefined ? v : String(v).replace(/[&<>"']/g, (c) => HTML[c]));
  const FRAME = /at __ejs_t \(<input>:(\d+)/;
  const POSITION = /<input>:(\d+)/;
  const describe = (e) => {
    if (e instanceof Error) return String(e.name) + ": " + String(e.message);
    try { return "thrown: " + JSON.stringify(e); } catch (_e) { return "thrown: " + String(e); }
  };
  g.__ejs_main = async function () {
    const results = (ctx.results = []);
    for (const t of ctx.templates) {
      const out = [];
      const append = (v) => { if (v !== null && v !== undefined) out.push(String(v)); };
      const print = (...args) => { for (const a of args) append(a); };
      const result = { output: null, value: null, error: null, line: null, writes: [] };
      enter(t);
      touched = new Map();
      let fn = null;
      try {
        fn = (0, eval)("(async function __ejs_t(__append, __raw, __escape, print) {" + t.code + "\n})");
      } catch (e) {
        result.error = describe(e);
        const found = POSITION.exec(String(e && e.stack));
        result.line = found ? Number(found[1]) : null;
      }
      if (fn) {
        try {
          const value = await fn(append, raw, escape, print);
          result.output = out.join("");
          result.value = t.kind === "condition" ? !!value : null;
          if (t.kind === "initial") startWith(result.output);
        } catch (e) {
          result.error = describe(e);
          const found = FRAME.exec(String(e && e.stack));
          result.line = found ? Number(found[1]) : null;
        }
      }
      try {
        for (const [scope, key] of touched.values()) {
          const value = S[scope][key];
          result.writes.push(value === undefined
            ? { scope, key, value: null, deleted: true }
            : { scope, key, value: cloneDeep(value), deleted: false });
        }
      } catch (e) {
        // A BigInt or a cycle: not variables the chat can keep.
        result.error = "a variable it wrote is not JSON data: " + describe(e);
        result.writes = [];
      }
      touched = null;
      results.push(result);
    }
    // Only the results go back to the host.
    for (const k of ["scopes", "templates", "names", "message", "seed", "states", "card", "worldinfo"]) delete ctx[k];
  };
})();
__ejs_main();

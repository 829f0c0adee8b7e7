/* storyloom's stand-in for Zod: builds a JSON Schema (see mvu_zod.py). Statements end
   with semicolons and hold no line comments: the file runs joined into one line. */
var __zodErr = function (what) {
  var lines = String(new Error().stack || '').match(/:\d+:\d+\)/g) || [];
  var at = lines.map(function (f) { return parseInt(f.slice(1), 10); }).filter(function (n) { return n > 1 && n <= __zodLines; });
  throw new Error(what + ' is not supported by storyloom' + (at.length ? ' (line ' + at[0] + ')' : ''));
};
var __zodWrap = function (node) {
  return new Proxy(node, { get: function (t, p) {
    if (typeof p !== 'string' || p in t || p === 'then' || p === 'toJSON') { return t[p]; }
    __zodErr('.' + p + '()');
  } });
};
var __zodMake = function (js) {
  var node = { _js: js, _optional: false, _shape: undefined };
  var again = function (extra, flags) {
    var copy = JSON.parse(JSON.stringify(node._js));
    for (var k in extra) { copy[k] = extra[k]; }
    var made = __zodMake(copy); made._optional = node._optional; made._shape = node._shape;
    if (flags) { for (var f in flags) { made[f] = flags[f]; } }
    return made;
  };
  var bound = function (lo, hi) {
    var t = node._js.type;
    if (t === 'string') { return [lo, hi].map(function (k) { return k + 'Length'; }); }
    if (t === 'array') { return [lo, hi].map(function (k) { return k + 'Items'; }); }
    if (t === 'object') { return [lo, hi].map(function (k) { return k + 'Properties'; }); }
    return ['minimum', 'maximum'];
  };
  node.optional = function () { return again({}, { _optional: true }); };
  node.nullish = node.optional;
  node.nullable = function () {
    var t = node._js.type;
    if (typeof t === 'string') { return again({ type: [t, 'null'] }); }
    return __zodMake({ anyOf: [node._js, { type: 'null' }] });
  };
  node.default = function (v) { return again({ default: typeof v === 'function' ? v() : v }, { _optional: true }); };
  node.prefault = node.default;
  node.catch = function (v) { return again({ 'x-catch': typeof v === 'function' ? v({}) : v }); };
  node.describe = function (d) { return again({ description: String(d) }); };
  node.meta = function (m) { return again(m && m.description ? { description: String(m.description) } : {}); };
  node.min = function (n) { var k = bound('min', 'max'); var e = {}; e[k[0]] = n; return again(e); };
  node.max = function (n) { var k = bound('min', 'max'); var e = {}; e[k[1]] = n; return again(e); };
  node.gte = node.min; node.lte = node.max;
  node.length = function (n) { var k = bound('min', 'max'); var e = {}; e[k[0]] = n; e[k[1]] = n; return again(e); };
  node.nonempty = function () { return node.min(1); };
  node.int = function () { return again({ type: 'integer' }); };
  node.positive = function () { return again({ exclusiveMinimum: 0 }); };
  node.nonnegative = function () { return again({ minimum: 0 }); };
  node.negative = function () { return again({ exclusiveMaximum: 0 }); };
  node.nonpositive = function () { return again({ maximum: 0 }); };
  node.finite = function () { return again({}); };
  node.trim = function () { return again({}); };
  node.transform = function () { return again({}); };
  node.refine = function () { return again({}); };
  node.superRefine = node.refine; node.check = node.refine; node.pipe = node.refine;
  node.readonly = function () { return again({}); };
  node.passthrough = function () { return again({ additionalProperties: true }); };
  node.loose = node.passthrough;
  node.strict = function () { return again({ additionalProperties: false }); };
  node.strip = function () { return again({}); };
  node.or = function (other) { return __zodMake({ anyOf: [node._js, other._js] }); };
  node.array = function () { return __zodMake({ type: 'array', items: node._js }); };
  node.extend = function (shape) { return z.object(Object.assign({}, node._shape || {}, shape)); };
  node.partial = function () {
    var s = {}; for (var k in (node._shape || {})) { s[k] = node._shape[k].optional(); }
    return z.object(s);
  };
  return __zodWrap(node);
};
var __zodCoerce = function (make, type) { return function () { return __zodMake(Object.assign(make()._js, { 'x-coerce': type })); }; };
var z = {
  string: function () { return __zodMake({ type: 'string' }); },
  number: function () { return __zodMake({ type: 'number' }); },
  boolean: function () { return __zodMake({ type: 'boolean' }); },
  any: function () { return __zodMake({}); },
  unknown: function () { return __zodMake({}); },
  null: function () { return __zodMake({ type: 'null' }); },
  literal: function (v) { return __zodMake({ const: v }); },
  enum: function (values) {
    var list = Array.isArray(values) ? values : Object.keys(values).map(function (k) { return values[k]; });
    return __zodMake({ type: 'string', enum: list });
  },
  array: function (item) { return __zodMake({ type: 'array', items: item ? item._js : {} }); },
  tuple: function (items) { return __zodMake({ type: 'array', prefixItems: items.map(function (i) { return i._js; }), minItems: items.length, maxItems: items.length }); },
  record: function (a, b) {
    var value = b === undefined ? a : b;
    return __zodMake({ type: 'object', additionalProperties: value ? value._js : {} });
  },
  union: function (options) { return __zodMake({ anyOf: options.map(function (o) { return o._js; }) }); },
  discriminatedUnion: function (_key, options) { return z.union(options); },
  optional: function (s) { return s.optional(); },
  object: function (shape) {
    var props = {}; var required = [];
    for (var key in shape) {
      var field = shape[key];
      if (!field || !field._js) { __zodErr('a field that is not a schema (' + key + ')'); }
      props[key] = field._js;
      if (!field._optional) { required.push(key); }
    }
    var js = { type: 'object', properties: props };
    if (required.length) { js.required = required; }
    var made = __zodMake(js); made._shape = shape; return made;
  }
};
z.strictObject = function (shape) { return z.object(shape).strict(); };
z.looseObject = function (shape) { return z.object(shape).passthrough(); };
z.coerce = {
  number: __zodCoerce(z.number, 'number'),
  string: __zodCoerce(z.string, 'string'),
  boolean: __zodCoerce(z.boolean, 'boolean')
};
z = new Proxy(z, { get: function (t, p) {
  if (typeof p !== 'string' || p in t) { return t[p]; }
  __zodErr('z.' + p + '()');
} });
var __registered = [];
var registerMvuSchema = function (schema) {
  __registered.push(typeof schema === 'function' ? schema() : schema);
};
var $ = function (fn) { if (typeof fn === 'function') { fn(); } return $; };
var jQuery = $;

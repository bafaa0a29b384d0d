// Shared by cvm's pages: building DOM from untrusted data without ever
// parsing it as HTML. Every string from a peer, an announcement or a tool
// becomes a text node; attributes come from an allow-list; markdown is a
// small subset turned into elements by hand.
"use strict";
var cvmui = (function () {
  var SAFE_ATTRS = { "class": 1, "id": 1, "for": 1, "type": 1, "name": 1, "value": 1, "placeholder": 1,
    "role": 1, "title": 1, "href": 1, "rel": 1, "target": 1, "alt": 1, "src": 1, "min": 1, "max": 1,
    "step": 1, "rows": 1, "autocomplete": 1, "hidden": 1, "tabindex": 1, "lang": 1,
    "method": 1, "action": 1, "colspan": 1 };

  // el(tag, attrs, ...children): children are nodes or strings (text).
  function el(tag, attrs) {
    var n = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (k) {
        var v = attrs[k];
        if (v === undefined || v === null || v === false) return;
        if (k === "text") { n.textContent = String(v); return; }
        if (k.indexOf("aria-") === 0 || k.indexOf("data-") === 0 || SAFE_ATTRS[k]) {
          if (k === "href" && !safeURL(String(v))) return;
          n.setAttribute(k, v === true ? "" : String(v));
          return;
        }
        if (k === "required" || k === "checked" || k === "disabled" || k === "multiple") { n[k] = !!v; return; }
        throw new Error("attribute not allowed: " + k);
      });
    }
    for (var i = 2; i < arguments.length; i++) append(n, arguments[i]);
    return n;
  }

  function append(parent, c) {
    if (c === undefined || c === null || c === false) return;
    if (Array.isArray(c)) { c.forEach(function (x) { append(parent, x); }); return; }
    parent.appendChild(typeof c === "object" && c.nodeType ? c : document.createTextNode(String(c)));
  }

  function clear(n) { while (n.firstChild) n.removeChild(n.firstChild); }

  // Links only to http, https and mailto: never javascript: or data:.
  function safeURL(u) {
    try {
      var p = new URL(u, location.href);
      return p.protocol === "http:" || p.protocol === "https:" || p.protocol === "mailto:";
    } catch (e) { return false; }
  }

  // Inline markdown: `code`, **strong**, *em* / _em_, [text](url).
  function inline(src) {
    var out = [];
    var re = /`([^`]+)`|\*\*([^*]+)\*\*|__([^_]+)__|\*([^*\s][^*]*)\*|_([^_\s][^_]*)_|\[([^\]]+)\]\(([^)\s]+)\)/g;
    var last = 0, m;
    while ((m = re.exec(src)) !== null) {
      if (m.index > last) out.push(src.slice(last, m.index));
      if (m[1] !== undefined) out.push(el("code", null, m[1]));
      else if (m[2] !== undefined || m[3] !== undefined) out.push(el("strong", null, inline(m[2] || m[3])));
      else if (m[4] !== undefined || m[5] !== undefined) out.push(el("em", null, inline(m[4] || m[5])));
      else if (safeURL(m[7])) out.push(el("a", { href: m[7], rel: "noopener noreferrer nofollow", target: "_blank" }, m[6]));
      else out.push(m[0]);
      last = re.lastIndex;
    }
    if (last < src.length) out.push(src.slice(last));
    return out;
  }

  // markdown(src) returns a fragment: paragraphs, fenced code blocks,
  // bullet and numbered lists, and the inline subset. Nothing else in the
  // source has meaning: it stays text.
  function markdown(src) {
    var frag = document.createDocumentFragment();
    var lines = String(src).replace(/\r\n?/g, "\n").split("\n");
    var i = 0, para = [];
    function flush() {
      if (para.length) { frag.appendChild(el("p", null, inline(para.join(" ")))); para = []; }
    }
    while (i < lines.length) {
      var line = lines[i];
      if (/^```/.test(line)) {
        flush();
        var code = [];
        for (i++; i < lines.length && !/^```/.test(lines[i]); i++) code.push(lines[i]);
        i++;
        frag.appendChild(el("pre", null, el("code", null, code.join("\n"))));
        continue;
      }
      var ul = /^\s*[-*+]\s+(.*)$/, ol = /^\s*\d+[.)]\s+(.*)$/;
      if (ul.test(line) || ol.test(line)) {
        flush();
        var re = ul.test(line) ? ul : ol;
        var list = el(re === ul ? "ul" : "ol");
        for (; i < lines.length && re.test(lines[i]); i++) list.appendChild(el("li", null, inline(re.exec(lines[i])[1])));
        frag.appendChild(list);
        continue;
      }
      if (/^\s*$/.test(line)) flush(); else para.push(line.trim());
      i++;
    }
    flush();
    return frag;
  }

  // schemaForm builds inputs for a JSON Schema object (a tool's
  // inputSchema): strings, numbers, integers, booleans and enums get their
  // own control; objects and arrays are typed as JSON. values() returns the
  // arguments or throws an Error naming the field that is wrong.
  var formSeq = 0;
  function schemaForm(schema) {
    var box = el("div", { "class": "schema-form" });
    var fields = [];
    var props = (schema && typeof schema === "object" && schema.properties && typeof schema.properties === "object") ? schema.properties : {};
    var required = Array.isArray(schema && schema.required) ? schema.required : [];
    Object.keys(props).forEach(function (name) {
      var p = props[name] && typeof props[name] === "object" ? props[name] : {};
      var id = "f" + (++formSeq);
      // A nullable field is typed ["null", "array"] by some generators:
      // its control is that of the type that is not null.
      var type = Array.isArray(p.type) ? p.type.filter(function (t) { return t !== "null"; })[0] : p.type;
      var req = required.indexOf(name) >= 0;
      var input;
      if (Array.isArray(p["enum"])) {
        input = el("select", { id: id, name: name });
        if (!req) input.appendChild(el("option", { value: "" }, "(none)"));
        p["enum"].forEach(function (v, k) { input.appendChild(el("option", { value: String(k) }, JSON.stringify(v))); });
      } else if (type === "boolean") {
        input = el("input", { id: id, name: name, type: "checkbox", checked: p["default"] === true });
      } else if (type === "number" || type === "integer") {
        input = el("input", { id: id, name: name, type: "number", step: type === "integer" ? "1" : "any" });
        if (typeof p["default"] === "number") input.value = String(p["default"]);
      } else if (type === "string") {
        input = el("input", { id: id, name: name, type: "text", autocomplete: "off" });
        if (typeof p["default"] === "string") input.value = p["default"];
      } else {
        input = el("textarea", { id: id, name: name, rows: 3, placeholder: "JSON" });
        if (p["default"] !== undefined) input.value = JSON.stringify(p["default"]);
      }
      if (req) input.setAttribute("aria-required", "true");
      var label = el("label", { "for": id }, name, req ? " (required)" : "", type ? " — " + type : "");
      var help = p.description ? el("div", { "class": "help" }, String(p.description)) : null;
      box.appendChild(el("div", { "class": "field" }, label, help, input));
      fields.push({ name: name, p: p, type: type, req: req, input: input });
    });
    if (!fields.length) box.appendChild(el("p", { "class": "help" }, "This tool takes no arguments."));
    function values() {
      var args = {};
      fields.forEach(function (f) {
        var v = f.input.value;
        if (Array.isArray(f.p["enum"])) {
          if (v === "") { if (f.req) throw new Error(f.name + " is required"); return; }
          args[f.name] = f.p["enum"][Number(v)];
        } else if (f.type === "boolean") {
          args[f.name] = f.input.checked;
        } else if (f.type === "number" || f.type === "integer") {
          if (v === "") { if (f.req) throw new Error(f.name + " is required"); return; }
          var n = Number(v);
          if (!isFinite(n) || (f.type === "integer" && Math.floor(n) !== n)) throw new Error(f.name + " must be " + (f.type === "integer" ? "an integer" : "a number"));
          args[f.name] = n;
        } else if (f.type === "string") {
          if (v === "" && f.req) throw new Error(f.name + " is required");
          if (v !== "" || f.req) args[f.name] = v;
        } else {
          if (v.trim() === "") { if (f.req) throw new Error(f.name + " is required (JSON)"); return; }
          try { args[f.name] = JSON.parse(v); } catch (e) { throw new Error(f.name + " is not valid JSON: " + e.message); }
        }
      });
      return args;
    }
    return { node: box, values: values };
  }

  // content renders an MCP tool result: text as text, images as data:
  // URLs of image types only, resources by URI and text, structured
  // content as JSON text.
  function content(result) {
    var box = el("div", { "class": "content" });
    if (!result || typeof result !== "object") { box.appendChild(el("pre", null, JSON.stringify(result))); return box; }
    if (result.isError) box.appendChild(el("p", { "class": "error", role: "alert" }, "The tool reported an error:"));
    (Array.isArray(result.content) ? result.content : []).forEach(function (c) {
      if (!c || typeof c !== "object") return;
      if (c.type === "text") box.appendChild(el("pre", { "class": "text" }, String(c.text)));
      else if (c.type === "image" && /^image\/(png|jpeg|gif|webp)$/.test(String(c.mimeType)) && /^[A-Za-z0-9+/=\s]*$/.test(String(c.data))) {
        var img = el("img", { alt: "image from the tool (" + c.mimeType + ")", src: "data:" + c.mimeType + ";base64," + String(c.data).replace(/\s/g, "") });
        box.appendChild(img);
      } else if (c.type === "resource" && c.resource) {
        box.appendChild(el("div", { "class": "resource" }, "resource " + String(c.resource.uri || ""), c.resource.text !== undefined ? el("pre", null, String(c.resource.text)) : null));
      } else if (c.type === "resource_link") {
        box.appendChild(el("div", { "class": "resource" }, "link " + String(c.uri || "") + (c.name ? " (" + c.name + ")" : "")));
      } else {
        box.appendChild(el("pre", null, c.type + ": " + JSON.stringify(c)));
      }
    });
    if (result.structuredContent !== undefined) {
      box.appendChild(el("div", { "class": "help" }, "Structured content:"));
      box.appendChild(el("pre", { "class": "structured" }, JSON.stringify(result.structuredContent, null, 2)));
    }
    return box;
  }

  // disclosure keeps at most one panel (a tool's form) open, inside the
  // item whose button opened it: however long the list, the page does not
  // jump away from where the person clicked. The panel's first field takes
  // the focus, scrolled into view with as much of the panel as fits; the
  // button says aria-expanded, and clicking it again closes the panel.
  //
  // A page that rebuilds its list calls hold() before and restore() after:
  // the panel moves as it is (what was typed, a call under way, its
  // result) into the rebuilt item, and the focus goes back into it if it
  // was there and has gone nowhere else meanwhile.
  function disclosure() {
    var cur = null; // { key, panel, opener, focus }
    function shut() {
      if (!cur) return;
      cur.panel.remove();
      cur.opener.setAttribute("aria-expanded", "false");
      cur = null;
    }
    function show(opener, place) {
      place.appendChild(cur.panel);
      cur.opener = opener;
      opener.setAttribute("aria-expanded", "true");
      for (var d = place.closest("details"); d; d = d.parentElement && d.parentElement.closest("details")) d.open = true;
    }
    return {
      // toggle opens build()'s panel at the end of place (the item holding
      // opener), after closing any other; on the open panel's own button,
      // it only closes.
      toggle: function (key, opener, place, build) {
        var again = cur && cur.opener === opener && cur.panel.isConnected;
        shut();
        if (again) return;
        cur = { key: key, panel: build(), opener: opener, focus: null };
        show(opener, place);
        cur.panel.scrollIntoView({ block: "nearest" });
        var first = cur.panel.querySelector("input, select, textarea, button");
        if (first) first.focus({ preventScroll: true });
      },
      // close closes the open panel and gives the focus back to its button.
      close: function () {
        var opener = cur && cur.opener;
        shut();
        if (opener && opener.isConnected) opener.focus();
      },
      // key is the open (or held) panel's key, null when none is.
      key: function () { return cur ? cur.key : null; },
      // hold takes the open panel out of the page, noting whether it had
      // the focus.
      hold: function () {
        if (!cur || !cur.panel.isConnected) return;
        var a = document.activeElement;
        cur.focus = cur.panel.contains(a) ? a : null;
        cur.panel.remove();
      },
      // restore puts the held panel under opener, in place; without an
      // opener (its item is not listed now) the panel stays held, and
      // restore reports false.
      restore: function (opener, place) {
        if (!cur || cur.panel.isConnected) return true;
        if (!opener) return false;
        show(opener, place);
        var a = document.activeElement;
        if (cur.focus && (!a || a === document.body)) cur.focus.focus({ preventScroll: true });
        cur.focus = null;
        return true;
      }
    };
  }

  function uuid() {
    if (crypto.randomUUID) return crypto.randomUUID();
    var b = crypto.getRandomValues(new Uint8Array(16));
    b[6] = b[6] & 15 | 64; b[8] = b[8] & 63 | 128;
    var h = Array.prototype.map.call(b, function (x) { return (x + 256).toString(16).slice(1); }).join("");
    return h.slice(0, 8) + "-" + h.slice(8, 12) + "-" + h.slice(12, 16) + "-" + h.slice(16, 20) + "-" + h.slice(20);
  }

  return { el: el, append: append, clear: clear, markdown: markdown, schemaForm: schemaForm, content: content, safeURL: safeURL, uuid: uuid,
    disclosure: disclosure };
})();

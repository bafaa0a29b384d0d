// The ContextVM catalog page. Every string from an announcement or a tool
// result is inserted as text (cvmui builds the DOM); filters live in the URL.
"use strict";
(function () {
  var el = cvmui.el, clear = cvmui.clear;
  var $ = function (id) { return document.getElementById(id); };
  var pageToken = document.querySelector('meta[name="cvm-page-token"]').getAttribute("content");
  var FILTERS = [["text", "f-text"], ["tool", "f-tool"], ["category", "f-category"], ["schema", "f-schema"], ["max_price", "f-price"], ["sort", "f-sort"]];
  var tryIt = false, budget = "", loadSeq = 0, servers = {};
  // A page opened with a filter naming tools (a link to one tool, say)
  // brings the first tool it names into view, once: later renders, live
  // or as the person types, leave the scroll where the person put it.
  var revealMatch = true;
  // The Try it panel opens inside the item of the tool tried, right under
  // its button, however long the list; it moves, as it is, with its tool
  // when the list is rebuilt (live, or as filters change). trySpots maps a
  // listed tool's key to its button and item.
  var tries = cvmui.disclosure(), trySpots = Object.create(null);

  function status(msg, kind) { var s = $("status"); s.textContent = msg; s.className = "status" + (kind ? " " + kind : ""); }

  function query() {
    var q = new URLSearchParams();
    FILTERS.forEach(function (f) { var v = $(f[1]).value.trim(); if (v) q.set(f[0], v); });
    if ($("f-encrypted").checked) q.set("encrypted", "1");
    return q;
  }
  function fromURL() {
    var q = new URLSearchParams(location.search);
    FILTERS.forEach(function (f) { $(f[1]).value = q.get(f[0]) || ""; });
    $("f-encrypted").checked = q.get("encrypted") === "1";
  }

  function load() {
    var q = query(), mine = ++loadSeq;
    var search = q.toString();
    if (("?" + search) !== location.search && !(search === "" && location.search === "")) {
      history.replaceState(null, "", search ? "?" + search : location.pathname);
    }
    return fetch("/api/servers?" + search, { cache: "no-store" }).then(function (r) {
      return r.json().then(function (b) { if (!r.ok) throw new Error(b.message || "HTTP " + r.status); return b; });
    }).then(function (body) {
      if (mine !== loadSeq) return;
      tryIt = !!body.tryIt; budget = body.budget || "";
      $("f-sort-field").hidden = !body.reputation;
      render(body.servers || []);
    }, function (e) { status("Could not load the catalog: " + e.message, "bad"); });
  }

  function render(list) {
    var ol = $("servers");
    tries.hold();
    clear(ol);
    servers = {};
    trySpots = Object.create(null);
    list.forEach(function (s) { servers[s.pubkey] = s; ol.appendChild(serverItem(s)); });
    var open = tries.key(), spot = (open !== null && trySpots[open]) || {};
    var held = !tries.restore(spot.button, spot.item);
    status((list.length === 1 ? "1 server." : list.length + " servers.") +
      (held ? " The tool you were trying is not listed now: its Try it panel comes back with it." : ""), list.length ? "good" : "");
    var first = ol.querySelector("li.match");
    if (revealMatch && first) first.scrollIntoView({ block: "center" });
    revealMatch = false;
  }

  function price(t) {
    if (!t.price) return "free";
    if (t.price.unknown) return "price: " + String(t.price.unknown);
    return String(t.price.amount) + " " + String(t.price.unit);
  }

  function serverItem(s) {
    var head = el("header", null);
    if (s.hasPicture) {
      var img = el("img", { src: "/api/picture/" + encodeURIComponent(s.pubkey), alt: "" });
      img.addEventListener("error", function () { img.remove(); });
      head.appendChild(img);
    }
    head.appendChild(el("div", null, el("h3", null, String(s.name || "(no name)")),
      el("div", { "class": "npub" }, String(s.npub))));
    var who = String(s.name || s.npub);
    // The tools the filter names come first, marked; the others wait,
    // folded, under them.
    var all = s.tools || [];
    var matched = all.filter(function (t) { return t.match; });
    var others = all.filter(function (t) { return !t.match; });
    var tools = el("ul", { "class": "tools", "aria-label": (matched.length ? "Tools of " + who + " the filter names" : "Tools of " + who) });
    (matched.length ? matched : all).forEach(function (t) { tools.appendChild(toolItem(s, t)); });
    var folded = null;
    if (matched.length && others.length) {
      var rest = el("ul", { "class": "tools", "aria-label": "Other tools of " + who });
      others.forEach(function (t) { rest.appendChild(toolItem(s, t)); });
      folded = el("details", { "class": "others" }, el("summary", null, others.length === 1 ? "1 other tool" : others.length + " other tools"), rest);
    }
    // The score and its reason (package reputation), when the page ranks.
    var rep = s.reputation ? el("div", { "class": "reputation" }, el("span", { "class": "badge" }, "reputation " + Number(s.reputation.score).toFixed(1)),
      " " + String(s.reputation.why)) : null;
    var meta = [s.encryption ? "encrypted" : "plaintext only"];
    if (s.categories && s.categories.length) meta.push("categories: " + s.categories.join(", "));
    return el("li", { "class": "server", "data-pubkey": String(s.pubkey) }, head,
      s.about ? el("p", { "class": "about" }, String(s.about)) : null,
      rep,
      el("div", { "class": "help" }, meta.join(" · ")),
      s.relays && s.relays.length ? el("div", { "class": "help" }, "relays: " + s.relays.join(", ")) : null,
      tools, folded);
  }

  function toolItem(s, t) {
    var schema = null;
    if (t.schemaHash) schema = el("div", { "class": "help" }, "common schema " + String(t.schemaHash).slice(0, 16) + "… ",
      t.verified ? el("span", { "class": "verified" }, "verified") : el("span", { "class": "unverified" }, "NOT verified"));
    var li = el("li", { "data-tool": String(t.name), "class": t.match ? "match" : null }, el("span", { "class": "tname" }, String(t.name)),
      el("span", { "class": "badge" }, price(t)), t.match ? el("span", { "class": "badge matches" }, "matches the filter") : null,
      t.description ? el("div", { "class": "help" }, String(t.description)) : null, schema);
    if (tryIt) {
      var key = s.pubkey + "\n" + t.name;
      var b = el("button", { type: "button", "class": "secondary", "aria-expanded": "false", "aria-label": "Try " + String(t.name) + " of " + String(s.name || s.npub) }, "Try it");
      b.addEventListener("click", function () { tries.toggle(key, b, li, function () { return tryForm(s, t); }); });
      li.appendChild(b);
      trySpots[key] = { button: b, item: li };
    }
    return li;
  }

  // tryForm is the Try it panel of tool t of server s: the tool's name and
  // description are just above it, in the tool's item.
  function tryForm(s, t) {
    var pubkey = s.pubkey, name = t.name;
    var f = cvmui.schemaForm(t.inputSchema);
    var out = el("div", { "class": "result", "aria-live": "polite" });
    var btn = el("button", { type: "submit" }, t.price ? "Call " + name + " (" + price(t) + ")" : "Call " + name);
    var cancel = el("button", { type: "button", "class": "secondary" }, "Close");
    cancel.addEventListener("click", function () { tries.close(); });
    var form = el("form", { id: "try-form", "class": "tool-form", method: "post", action: "/", "aria-label": "Try " + String(name) + " of " + String(s.name || s.npub) },
      t.price ? el("p", { "class": "help" }, "Priced: " + price(t) + ". You will be asked to confirm before anything is paid." + (budget ? " Budget: " + budget + "." : "")) : null,
      f.node, btn, cancel, out);
    form.addEventListener("submit", function (ev) {
      ev.preventDefault();
      clear(out);
      var args;
      try { args = f.values(); } catch (e) { out.appendChild(el("p", { "class": "error", role: "alert" }, e.message)); return; }
      call(pubkey, name, args, null, out, btn);
    });
    return form;
  }

  // callSteps shows how a call goes, one line a step as the steps come,
  // the current one with the seconds it has taken so far (hidden from
  // screen readers, which hear each new step).
  function callSteps(out) {
    var ol = el("ol", { "class": "steps", "aria-label": "Steps of the call" });
    out.appendChild(ol);
    var cur = null, start = Date.now();
    var timer = setInterval(function () { if (cur) cur.clock.textContent = " " + seconds(cur.since); }, 1000);
    function seconds(since) { return ((Date.now() - since) / 1000).toFixed(1) + " s"; }
    function settle() { if (cur) { cur.li.className = "step done"; cur.clock.textContent = ""; } }
    return {
      step: function (kind, text) {
        settle();
        var clock = el("span", { "class": "clock", "aria-hidden": "true" }), detail = el("span", { "class": "detail" });
        var li = el("li", { "class": "step current", "data-step": kind }, text, detail, clock);
        ol.appendChild(li);
        cur = { kind: kind, li: li, clock: clock, detail: detail, since: Date.now() };
      },
      current: function () { return cur && cur.kind; },
      detail: function (text) { if (cur) cur.detail.textContent = " " + text; },
      end: function () { settle(); clearInterval(timer); return seconds(start); }
    };
  }

  function payee(to) {
    to = to || {};
    return String(to.name || "(no name)") + " (" + String(to.npub || "") + ")";
  }

  function call(pubkey, name, args, quote, out, btn) {
    clear(out);
    var steps = callSteps(out), paid = null, over = false;
    var s = servers[pubkey] || {};
    steps.step("calling", "Calling " + name + " of " + String(s.name || s.npub || "the server") + "…");
    btn.disabled = true;
    var payload = { server: pubkey, tool: name, arguments: args };
    if (quote) payload.quote = quote;
    function failed(msg) {
      over = true;
      steps.end();
      if (paid) out.appendChild(el("p", { "class": "receipt" }, "Paid " + paid + ", and the call failed."));
      out.appendChild(el("p", { "class": "error", role: "alert" }, "Failed: " + msg));
    }
    fetch("/api/call", { method: "POST", cache: "no-store", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CVM-Page-Token": pageToken }, body: JSON.stringify(payload) })
      .then(function (r) {
        if (r.status === 402) return r.json().then(function (b) { over = true; steps.end(); clear(out); confirmPay(pubkey, name, args, b, out, btn); });
        if (!r.ok) return r.json().catch(function () { return {}; }).then(function (b) { throw new Error(b.message || "HTTP " + r.status); });
        return readLines(r, function (m) {
          var p = m.payment || {};
          if (m.step === "waiting" && steps.current() !== "waiting") steps.step("waiting", "Waiting for the result…");
          else if (m.step === "paying") steps.step("paying", "Waiting for payment: paying " + String(p.amount) + " " + String(p.unit) + " to " + payee(p.to) + "…");
          else if (m.step === "paid") {
            paid = String(p.amount) + " " + String(p.unit) + " to " + payee(p.to);
            steps.step("paid", "Paid " + paid + ".");
            steps.step("waiting", "Waiting for the result…");
          } else if (m.progress) steps.detail("Running: " + (m.progress.message ? String(m.progress.message) + " " : "") +
            String(m.progress.progress) + (m.progress.total ? " / " + String(m.progress.total) : ""));
          else if (m.result) {
            over = true;
            steps.step("done", "Done.");
            var took = steps.end();
            out.appendChild(el("p", { "class": "help" }, "Took " + took + "."));
            if (paid) out.appendChild(el("p", { "class": "receipt" }, "Paid " + paid + "."));
            out.appendChild(cvmui.content(m.result));
          } else if (m.error) failed(String(m.error));
        }).then(function () { if (!over) failed("the answer ended before the result came"); });
      })
      .catch(function (e) { failed(e.message); })
      .then(function () { btn.disabled = false; });
  }

  function readLines(resp, each) {
    var reader = resp.body.getReader(), dec = new TextDecoder(), buf = "";
    function pump() {
      return reader.read().then(function (r) {
        buf += dec.decode(r.value || new Uint8Array(), { stream: !r.done });
        var i;
        while ((i = buf.indexOf("\n")) >= 0) {
          var line = buf.slice(0, i); buf = buf.slice(i + 1);
          if (line.trim()) { try { each(JSON.parse(line)); } catch (e) { /* not a line of ours */ } }
        }
        if (!r.done) return pump();
      });
    }
    return pump();
  }

  // confirmPay shows the price; only the person's click sends the quote.
  function confirmPay(pubkey, name, args, b, out, btn) {
    var pay = el("button", { type: "button", id: "confirm-pay" }, "Pay up to " + String(b.amount) + " " + String(b.unit) + " and call");
    var no = el("button", { type: "button", "class": "secondary" }, "Cancel");
    var box = el("div", { "class": "confirm", role: "alertdialog", "aria-labelledby": "confirm-q" },
      el("p", { id: "confirm-q" }, String(b.message || "Confirm the payment.")), b.budget ? el("p", { "class": "help" }, "Budget: " + String(b.budget)) : null, pay, no);
    out.appendChild(box);
    btn.disabled = false;
    pay.addEventListener("click", function () { call(pubkey, name, args, b.quote, out, btn); });
    no.addEventListener("click", function () { clear(out); out.appendChild(el("p", { "class": "help" }, "Not called; nothing paid.")); });
    pay.focus();
  }

  var timer = null;
  function changed() { clearTimeout(timer); timer = setTimeout(load, 250); }
  FILTERS.forEach(function (f) { $(f[1]).addEventListener("input", changed); });
  $("f-encrypted").addEventListener("change", changed);
  $("filters").addEventListener("submit", function (ev) { ev.preventDefault(); load(); });
  $("f-clear").addEventListener("click", function () {
    FILTERS.forEach(function (f) { $(f[1]).value = ""; });
    $("f-encrypted").checked = false;
    load();
  });

  // The list is loaded and shown first; only then do live updates start,
  // from a worker (events.js): a stream the page itself held open would
  // be, to a headless browser with a virtual time budget (screenshot
  // tools), a load that never ends, and it would never show the list.
  function live() {
    var w = new Worker("/ui/events.js");
    w.addEventListener("message", function (ev) {
      if (ev.data === "error") status("Live updates interrupted; retrying…", "bad");
      else load(); // "open" (changes may have come meanwhile) or "changed"
    });
  }

  fromURL();
  load().then(live);
})();

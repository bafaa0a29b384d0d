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
  // /schema/HASH and /category/NAME are the catalog with that filter
  // fixed by the path, so that a link to one stays one.
  var fixed = (function () {
    var m = location.pathname.match(/^\/(schema|category)\/([^\/]+)$/);
    return m ? { key: m[1], input: m[1] === "schema" ? "f-schema" : "f-category", value: decodeURIComponent(m[2]) } : null;
  })();
  // Each server's profile and reviews part, made once: a rebuilt list
  // (live, or as filters change) moves it, as it is, open or not, with a
  // review being written in it.
  var aboutParts = Object.create(null);

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
    if (fixed) {
      $(fixed.input).value = fixed.value;
      $(fixed.input).readOnly = true;
      var what = fixed.key === "schema" ? "Servers implementing common schema " + fixed.value : "Servers in category " + fixed.value;
      $("title").textContent = what;
      document.title = what + " · cvm";
      clear($("subtitle"));
      $("subtitle").appendChild(el("a", { href: "/" }, "All servers"));
    }
  }

  function load() {
    var q = query(), mine = ++loadSeq;
    var search = q.toString();
    var shown = new URLSearchParams(q);
    if (fixed && shown.get(fixed.key) === fixed.value) shown.delete(fixed.key);
    var urlSearch = shown.toString();
    if (("?" + urlSearch) !== location.search && !(urlSearch === "" && location.search === "")) {
      history.replaceState(null, "", urlSearch ? "?" + urlSearch : location.pathname);
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
    var shown = String(t.price.amount) + " " + String(t.price.unit);
    // A usd price, with what it comes to at the catalog's rate.
    if (t.price.sats) shown += " (\u2248 " + String(t.price.sats) + " sats)";
    return shown;
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
    var meta = el("div", { "class": "help" }, s.encryption ? "encrypted" : "plaintext only");
    if (s.categories && s.categories.length) {
      meta.appendChild(document.createTextNode(" · categories: "));
      s.categories.forEach(function (c, i) {
        if (i) meta.appendChild(document.createTextNode(", "));
        meta.appendChild(el("a", { href: "/category/" + encodeURIComponent(String(c)), "class": "category-link" }, String(c)));
      });
    }
    return el("li", { "class": "server", "data-pubkey": String(s.pubkey) }, head,
      s.about ? el("p", { "class": "about" }, String(s.about)) : null,
      rep, meta, aboutPart(s),
      s.relays && s.relays.length ? el("div", { "class": "help" }, "relays: " + s.relays.join(", ")) : null,
      tools, folded);
  }

  function toolItem(s, t) {
    var schema = null;
    if (t.schemaHash) schema = el("div", { "class": "help" }, "common schema ",
      el("a", { href: "/schema/" + encodeURIComponent(String(t.schemaHash)), "class": "schema-link" }, String(t.schemaHash).slice(0, 16) + "…"), " ",
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

  // aboutPart is a server's profile, notes and reviews (CEP-23, CEP-24),
  // read when the person opens it. Every string in them is a stranger's,
  // and goes in as text.
  function aboutPart(s) {
    if (aboutParts[s.pubkey]) return aboutParts[s.pubkey];
    var box = el("div", { "class": "about-box", "aria-live": "polite" });
    var d = el("details", { "class": "social" }, el("summary", null, "Profile, notes and reviews"), box);
    d.addEventListener("toggle", function () { if (d.open) loadAbout(s, box); });
    aboutParts[s.pubkey] = d;
    return d;
  }

  function loadAbout(s, box) {
    clear(box);
    box.appendChild(el("p", { "class": "help" }, "Loading…"));
    fetch("/api/about/" + encodeURIComponent(s.pubkey), { cache: "no-store" }).then(function (r) {
      return r.json().then(function (b) { if (!r.ok) throw new Error(b.message || "HTTP " + r.status); return b; });
    }).then(function (a) {
      clear(box);
      box.appendChild(profileView(a));
      if (a.notes && a.notes.length) box.appendChild(el("section", { "class": "notes" }, el("h4", null, "Notes"),
        el("ul", null, a.notes.map(function (n) { return el("li", null, el("span", { "class": "when" }, when(n.createdAt)), " ", el("span", { "class": "note" }, String(n.content))); }))));
      box.appendChild(el("section", { "class": "reviews" }, el("h4", null, "Reviews"),
        a.reviews && a.reviews.length ? threadList(a.reviews) : el("p", { "class": "help" }, "No reviews yet.")));
      if (a.reviewer) box.appendChild(reviewForm(s, a.reviewer, box));
    }, function (e) { clear(box); box.appendChild(el("p", { "class": "error", role: "alert" }, "Could not load: " + e.message)); });
  }

  function when(sec) { return new Date(Number(sec) * 1000).toISOString().slice(0, 16).replace("T", " "); }

  function profileView(a) {
    var p = a.profile;
    if (!p) return el("p", { "class": "help" }, "No profile.");
    var site = p.website && /^https?:\/\//i.test(String(p.website)) ?
      el("a", { href: String(p.website), rel: "noopener noreferrer nofollow", target: "_blank" }, String(p.website)) : (p.website ? String(p.website) : null);
    return el("section", { "class": "profile" }, el("h4", null, "Profile"),
      el("div", { "class": "pname" }, String(p.display_name || p.name || "(no name)")),
      p.about ? el("p", { "class": "about" }, String(p.about)) : null,
      site ? el("div", null, "website: ", site) : null,
      p.nip05 ? el("div", { "class": "nip05" }, "NIP-05: " + String(p.nip05) + " ",
        a.nip05Verified ? el("span", { "class": "verified" }, "verified") : el("span", { "class": "unverified" }, "not verified")) : null,
      p.lud16 ? el("div", null, "lightning: " + String(p.lud16)) : null);
  }

  function stars(n) { n = Number(n) || 0; return n > 0 ? "★★★★★".slice(0, n) + "☆☆☆☆☆".slice(0, 5 - n) : ""; }

  function threadList(threads) {
    return el("ol", { "class": "thread plain" }, threads.map(function (t) {
      return el("li", { "class": "review", "data-id": String(t.id) },
        el("div", { "class": "who" }, t.rating ? el("span", { "class": "stars", "aria-label": String(t.rating) + " of 5" }, stars(t.rating)) : null,
          " ", el("span", { "class": "author" }, String(t.authorName || "")), " ", el("span", { "class": "npub" }, String(t.author)), " ",
          el("span", { "class": "when" }, when(t.createdAt))),
        el("p", { "class": "text" }, String(t.content)),
        t.replies && t.replies.length ? threadList(t.replies) : null);
    }));
  }

  // reviewForm posts the operator's review, signed by the page's
  // identity, once the person confirms it, as a payment is confirmed.
  function reviewForm(s, reviewer, box) {
    var text = el("textarea", { id: "review-text-" + s.pubkey, name: "review", rows: 3 });
    var rating = el("select", { id: "review-rating-" + s.pubkey, name: "rating" },
      ["", "1", "2", "3", "4", "5"].map(function (v) { return el("option", { value: v }, v ? v + " of 5" : "no rating"); }));
    var btn = el("button", { type: "submit" }, "Publish review");
    var out = el("div", { "class": "result", "aria-live": "polite" });
    var form = el("form", { "class": "review-form", method: "post", action: "/", "aria-label": "Review " + String(s.name || s.npub) },
      el("h4", null, "Your review"),
      el("p", { "class": "help" }, "Signed by this catalog's identity, " + String(reviewer) + ", and public."),
      el("label", { "for": text.id }, "Text"), text, el("label", { "for": rating.id }, "Rating"), rating, btn, out);
    form.addEventListener("submit", function (ev) {
      ev.preventDefault();
      var body = { server: s.pubkey, content: text.value, rating: Number(rating.value || 0) };
      postReview(body, out, btn, function () { loadAbout(s, box); });
    });
    return form;
  }

  function postReview(body, out, btn, done) {
    clear(out);
    btn.disabled = true;
    fetch("/api/review", { method: "POST", cache: "no-store", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CVM-Page-Token": pageToken }, body: JSON.stringify(body) })
      .then(function (r) {
        return r.json().catch(function () { return {}; }).then(function (b) {
          if (r.status === 202) {
            var yes = el("button", { type: "button", "class": "confirm-review" }, "Publish");
            var no = el("button", { type: "button", "class": "secondary" }, "Cancel");
            out.appendChild(el("div", { "class": "confirm", role: "alertdialog" }, el("p", null, String(b.message || "Publish this review?")), yes, no));
            yes.addEventListener("click", function () { body.quote = b.quote; postReview(body, out, btn, done); });
            no.addEventListener("click", function () { clear(out); out.appendChild(el("p", { "class": "help" }, "Not published.")); });
            yes.focus();
            return;
          }
          if (!r.ok) throw new Error(b.message || "HTTP " + r.status);
          done();
        });
      })
      .catch(function (e) { out.appendChild(el("p", { "class": "error", role: "alert" }, "Not published: " + e.message)); })
      .then(function () { btn.disabled = false; });
  }

  var timer = null;
  function changed() { clearTimeout(timer); timer = setTimeout(load, 250); }
  FILTERS.forEach(function (f) { $(f[1]).addEventListener("input", changed); });
  $("f-encrypted").addEventListener("change", changed);
  $("filters").addEventListener("submit", function (ev) { ev.preventDefault(); load(); });
  $("f-clear").addEventListener("click", function () {
    FILTERS.forEach(function (f) { $(f[1]).value = ""; });
    $("f-encrypted").checked = false;
    if (fixed) $(fixed.input).value = fixed.value;
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

// The MCPx room page. The token is held in this closure only: never put
// in a URL, a cookie, storage or the console.
"use strict";
(function () {
  var el = cvmui.el, clear = cvmui.clear;
  var $ = function (id) { return document.getElementById(id); };
  var PROTOCOL = "mcp-x/v0";
  var MCP_VERSION = "2025-06-18";

  var token = "", topic = "";
  var ws = null, me = null, leaving = false, retry = 0, retryTimer = null;
  var roster = {};          // id -> participant
  var seen = {};            // seq -> true: chat and envelopes shown once
  var oldest = 0, newest = 0, hasMore = false, loadingOlder = false;
  var pending = {};         // our request envelope id -> {peer, resolve, reject, progress, timer}
  var progressOf = {};      // progress token -> pending entry
  var ready = {};           // peer id -> promise of its initialize
  var rpcSeq = 0;
  // The one tool form open, right under the tool's button where the
  // person clicked, however long the list; its first field focused.
  var toolForms = cvmui.disclosure();

  function status(msg, kind) {
    var s = $("status");
    s.textContent = msg;
    s.className = "status" + (kind ? " " + kind : "");
  }

  function rest(path) {
    return fetch(path, { headers: { "Authorization": "Bearer " + token }, cache: "no-store", credentials: "omit" })
      .then(function (r) {
        return r.json().catch(function () { return {}; }).then(function (body) {
          if (!r.ok) {
            var e = new Error((body && body.error) || ("HTTP " + r.status));
            e.status = r.status;
            throw e;
          }
          return body;
        });
      });
  }

  function topicPath(suffix) { return "/v0/topics/" + encodeURIComponent(topic) + suffix; }

  $("join-form").addEventListener("submit", function (ev) {
    ev.preventDefault();
    topic = $("topic").value.trim();
    token = $("token").value.trim();
    $("token").value = "";
    if (!topic || !token) { status("Enter a topic and a token.", "bad"); return; }
    leaving = false;
    seen = {}; oldest = 0; newest = 0; hasMore = false;
    clear($("log"));
    clear($("envelopes"));
    status("Checking the token…");
    // A refused token is refused before any WebSocket upgrade, and a
    // browser only sees that as a failed socket: ask REST first, which
    // says why.
    rest(topicPath("/participants")).then(function () { connect(); }, function (e) {
      status("Cannot join " + topic + ": " + e.message, "bad");
      token = "";
    });
  });

  $("leave").addEventListener("click", function () {
    leaving = true;
    if (retryTimer) clearTimeout(retryTimer);
    if (ws) ws.close(1000, "leaving");
    token = "";
    me = null;
    $("room").hidden = true;
    $("join").hidden = false;
    status("Left the room.");
    $("topic").focus();
  });

  function connect() {
    var url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/v0/ws?topic=" + encodeURIComponent(topic);
    status("Connecting to " + topic + "…");
    var sock = new WebSocket(url, ["mcp-x.v0", "bearer." + token]);
    ws = sock;
    sock.onmessage = function (ev) {
      var env;
      try { env = JSON.parse(ev.data); } catch (e) { return; }
      if (!env || typeof env !== "object") return;
      handle(env, false);
    };
    sock.onclose = function (ev) {
      if (ws !== sock) return;
      ws = null;
      failAll("the connection to the gateway was lost");
      if (leaving) return;
      reconnect("Disconnected from the gateway (code " + ev.code + ").");
    };
  }

  // reconnect retries with backoff until the gateway takes the token again
  // or refuses it for good.
  function reconnect(why) {
    var delay = Math.min(10000, 500 * Math.pow(2, retry++));
    status(why + " Reconnecting in " + Math.max(1, Math.round(delay / 1000)) + " s…", "bad");
    retryTimer = setTimeout(function () {
      if (leaving) return;
      rest(topicPath("/participants")).then(connect, function (e) {
        if (e.status === 401 || e.status === 403) { status("The gateway refused the token: " + e.message, "bad"); return; }
        reconnect("The gateway is not answering (" + e.message + ").");
      });
    }, delay);
  }

  function send(env) {
    if (!ws || ws.readyState !== 1) throw new Error("not connected to the gateway");
    ws.send(JSON.stringify(env));
  }

  function envelope(to, payload, correlation) {
    var e = { protocol: PROTOCOL, id: cvmui.uuid(), ts: new Date().toISOString(), from: me.id, kind: "mcp", payload: payload };
    if (to) e.to = [to];
    if (correlation) e.correlation_id = correlation;
    return e;
  }

  function handle(env, replayed) {
    var seq = typeof env.seq === "number" ? env.seq : 0;
    if (seq && !replayed && seen[seq]) return;
    var p = env.payload && typeof env.payload === "object" ? env.payload : {};
    if (env.kind === "system" && (p.event === "welcome" || p.type === "welcome")) { welcome(p); showEnvelope(env); return; }
    if (seq) {
      if (seen[seq]) return;
      seen[seq] = true;
      if (seq > newest) newest = seq;
      if (!oldest || seq < oldest) oldest = seq;
    }
    showEnvelope(env);
    if (replayed && env.kind !== "mcp") return;
    if (env.kind === "presence") { presence(p); return; }
    if (env.kind === "system" && p.event === "error") {
      var target = env.correlation_id && pending[env.correlation_id];
      if (target) finish(env.correlation_id, new Error("gateway: " + String(p.code) + ": " + String(p.message)));
      else status("Gateway error " + String(p.code) + ": " + String(p.message), "bad");
      return;
    }
    if (env.kind !== "mcp") return;
    if (p.method === "notifications/chat/message") { chat(env, p.params || {}, false); return; }
    if (replayed) return;
    if (p.method === "notifications/progress" && p.params) {
      var pe = progressOf[p.params.progressToken];
      if (pe && pe.progress) pe.progress(p.params);
      return;
    }
    if (typeof p.method === "string" && p.id !== undefined && me && Array.isArray(env.to) && env.to.length === 1 && env.to[0] === me.id) {
      serve(env, p);
      return;
    }
    if (p.method === undefined && env.correlation_id && pending[env.correlation_id] && pending[env.correlation_id].peer === env.from) {
      if (p.error) finish(env.correlation_id, new Error("error " + String(p.error.code) + ": " + String(p.error.message)));
      else finish(env.correlation_id, null, p.result);
    }
  }

  function welcome(p) {
    me = p.participant || (p.participant_id ? { id: p.participant_id } : me);
    roster = {};
    (p.participants || []).forEach(function (x) { if (x && x.id) roster[x.id] = x; });
    if (me && me.id) roster[me.id] = roster[me.id] || me;
    ready = {};
    retry = 0;
    $("join").hidden = true;
    $("room").hidden = false;
    $("me").textContent = "(you are " + (me && (me.name || me.id)) + ")";
    renderRoster();
    status("Connected to " + topic + " as " + (me && me.id) + ".", "good");
    var path = newest ? topicPath("/history?after=" + newest + "&limit=1000") : topicPath("/history?limit=50");
    var first = !newest;
    rest(path).then(function (body) {
      var list = (body.history || []).slice().reverse();
      if (first) hasMore = !!body.has_more;
      list.forEach(function (e) { if (e && typeof e === "object") handle(e, true); });
      $("older").disabled = !hasMore;
    }, function (e) {
      if (e.status === 404) { $("older").disabled = true; return; }
      status("Could not read history: " + e.message, "bad");
    });
  }

  function loadOlder() {
    if (!hasMore || loadingOlder || !oldest) return;
    loadingOlder = true;
    var log = $("log"), before = log.scrollHeight;
    rest(topicPath("/history?before=" + oldest + "&limit=50")).then(function (body) {
      hasMore = !!body.has_more;
      (body.history || []).forEach(function (e) { if (e && typeof e === "object") handle(e, true); });
      log.scrollTop += log.scrollHeight - before;
      $("older").disabled = !hasMore;
    }, function (e) { status("Could not read older messages: " + e.message, "bad"); })
      .then(function () { loadingOlder = false; });
  }
  $("older").addEventListener("click", loadOlder);
  $("log").addEventListener("scroll", function () { if ($("log").scrollTop === 0) loadOlder(); });

  function presence(p) {
    var who = p.participant;
    if (!who || !who.id) return;
    if (p.event === "leave") {
      delete roster[who.id];
      delete ready[who.id];
      failPeer(who.id, who.id + " left the room");
      note(who.id + " left" + (p.reason ? " (" + p.reason + ")" : ""));
    } else {
      var isNew = !roster[who.id];
      if (p.event === "join") delete ready[who.id];
      roster[who.id] = who;
      if (isNew && p.event === "join") note(who.id + " joined");
    }
    renderRoster();
  }

  function renderRoster() {
    var ul = $("participants");
    clear(ul);
    Object.keys(roster).sort().forEach(function (id) {
      var x = roster[id];
      var li = el("li", { "data-id": id },
        el("span", { "class": "name" }, String(x.name || id)),
        x.name && x.name !== id ? el("span", { "class": "help" }, "(" + id + ")") : null,
        el("span", { "class": "badge" }, String(x.kind || "?")),
        me && id === me.id ? el("span", { "class": "badge" }, "you") : null);
      if (!me || id !== me.id) {
        var b = el("button", { type: "button", "class": "secondary", "aria-label": "Tools of " + id }, "Tools");
        b.addEventListener("click", function () { listTools(id); });
        li.appendChild(b);
      }
      ul.appendChild(li);
    });
  }

  function insertBySeq(li, seq) {
    var log = $("log");
    var atBottom = log.scrollHeight - log.scrollTop - log.clientHeight < 40;
    li.setAttribute("data-seq", String(seq || 0));
    var next = null;
    if (seq) {
      for (var n = log.firstChild; n; n = n.nextSibling) {
        var s = Number(n.getAttribute("data-seq"));
        if (s && s > seq) { next = n; break; }
      }
    }
    log.insertBefore(li, next);
    if (atBottom && !next) log.scrollTop = log.scrollHeight;
  }

  function chat(env, params, _) {
    var text = typeof params.text === "string" ? params.text : JSON.stringify(params.text);
    var from = roster[env.from] && roster[env.from].name ? roster[env.from].name : env.from;
    var body = params.format === "markdown" ? el("div", { "class": "body" }, cvmui.markdown(text))
      : el("div", { "class": "body plaintext" }, text);
    var when = typeof env.ts === "string" ? env.ts.replace("T", " ").slice(0, 19) : "";
    insertBySeq(el("li", { "class": "chat" }, el("span", { "class": "from" }, String(from)), el("span", { "class": "when" }, when), body), env.seq);
  }

  function note(text) {
    insertBySeq(el("li", { "class": "note help" }, "* " + text), 0);
  }

  function showEnvelope(env) {
    var list = $("envelopes");
    var p = env.payload || {};
    var what = p.method || p.event || p.type || (p.result !== undefined ? "result" : p.error ? "error" : "");
    var line = (env.seq ? "#" + env.seq + " " : "") + String(env.kind) + " " + String(what) + " from " + String(env.from) +
      (Array.isArray(env.to) ? " to " + env.to.join(", ") : "");
    list.insertBefore(el("li", null, line), list.firstChild);
    while (list.childNodes.length > 200) list.removeChild(list.lastChild);
  }

  $("chat-form").addEventListener("submit", function (ev) {
    ev.preventDefault();
    var text = $("msg").value;
    if (!text.trim()) return;
    var params = { text: text };
    if ($("md").checked) params.format = "markdown";
    try {
      send(envelope(null, { jsonrpc: "2.0", method: "notifications/chat/message", params: params }));
      $("msg").value = "";
    } catch (e) { status("Not sent: " + e.message, "bad"); }
  });
  $("msg").addEventListener("keydown", function (ev) {
    if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); $("send").click(); }
  });

  // The page is a participant, so an MCP server too: it answers the
  // handshake and has no tools of its own.
  function serve(env, p) {
    var reply = { jsonrpc: "2.0", id: p.id };
    if (p.method === "initialize") {
      reply.result = { protocolVersion: (p.params && p.params.protocolVersion) || MCP_VERSION, capabilities: { tools: {} },
        serverInfo: { name: "cvm-room-page", version: "0" } };
    } else if (p.method === "tools/list") reply.result = { tools: [] };
    else if (p.method === "ping") reply.result = {};
    else reply.error = { code: -32601, message: "method not found: this participant is a person's browser page" };
    try { send(envelope(env.from, reply, env.id)); } catch (e) { /* the connection is gone; the caller sees the leave */ }
  }

  function request(peer, method, params, onProgress) {
    return new Promise(function (resolve, reject) {
      var env = envelope(peer, { jsonrpc: "2.0", id: ++rpcSeq, method: method, params: params || {} });
      var entry = { peer: peer, resolve: resolve, reject: reject, progress: onProgress };
      if (onProgress) { params._meta = { progressToken: env.id }; progressOf[env.id] = entry; }
      entry.timer = setTimeout(function () { finish(env.id, new Error("no answer from " + peer + " in 60 s")); }, 60000);
      pending[env.id] = entry;
      try { send(env); } catch (e) { finish(env.id, e); }
    });
  }

  function finish(id, err, result) {
    var entry = pending[id];
    if (!entry) return;
    delete pending[id];
    delete progressOf[id];
    clearTimeout(entry.timer);
    if (err) entry.reject(err); else entry.resolve(result);
  }
  function failPeer(peer, why) { Object.keys(pending).forEach(function (id) { if (pending[id].peer === peer) finish(id, new Error(why)); }); }
  function failAll(why) { Object.keys(pending).forEach(function (id) { finish(id, new Error(why)); }); ready = {}; }

  function initialized(peer) {
    if (!ready[peer]) {
      ready[peer] = request(peer, "initialize", { protocolVersion: MCP_VERSION, capabilities: {},
        clientInfo: { name: "cvm-room-page", version: "0" } }).then(function (r) {
        send(envelope(peer, { jsonrpc: "2.0", method: "notifications/initialized" }));
        return r;
      });
      ready[peer].catch(function () { delete ready[peer]; });
    }
    return ready[peer];
  }

  function listTools(peer) {
    var box = $("tools");
    clear(box);
    var head = el("h3", { tabindex: "-1" }, "Tools of " + peer);
    box.appendChild(head);
    var msg = el("p", { "class": "help", role: "status" }, "Asking " + peer + " for its tools…");
    box.appendChild(msg);
    head.focus();
    initialized(peer).then(function () { return request(peer, "tools/list", {}); }).then(function (r) {
      var tools = r && Array.isArray(r.tools) ? r.tools : [];
      msg.textContent = tools.length ? tools.length + " tools." : peer + " offers no tools.";
      var ul = el("ul", { "class": "plain tool-list" });
      tools.forEach(function (tool) {
        if (!tool || typeof tool.name !== "string") return;
        var b = el("button", { type: "button", "class": "secondary", "aria-expanded": "false", "data-tool": tool.name }, tool.name);
        var li = el("li", null, b, tool.description ? el("span", { "class": "help" }, " " + String(tool.description)) : null);
        b.addEventListener("click", function () { toolForms.toggle(peer + "\n" + tool.name, b, li, function () { return toolForm(peer, tool); }); });
        ul.appendChild(li);
      });
      box.appendChild(ul);
    }, function (e) { msg.textContent = "Could not list the tools of " + peer + ": " + e.message; msg.className = "error"; });
  }

  // toolForm is the form that calls a tool of peer; toolForms opens it
  // right under the tool's button.
  function toolForm(peer, tool) {
    var f = cvmui.schemaForm(tool.inputSchema);
    var out = el("div", { "class": "result", "aria-live": "polite" });
    var btn = el("button", { type: "submit" }, "Call " + tool.name);
    var form = el("form", { id: "tool-call", "class": "tool-form", method: "post", action: "/", "aria-label": peer + " · " + tool.name }, f.node, btn, out);
    form.addEventListener("submit", function (ev) {
      ev.preventDefault();
      clear(out);
      var args;
      try { args = f.values(); } catch (e) { out.appendChild(el("p", { "class": "error", role: "alert" }, e.message)); return; }
      var prog = el("p", { "class": "help", role: "status" }, "Calling " + tool.name + "…");
      out.appendChild(prog);
      btn.disabled = true;
      initialized(peer).then(function () {
        return request(peer, "tools/call", { name: tool.name, arguments: args }, function (pp) {
          prog.textContent = "Running: " + (pp.message ? String(pp.message) + " " : "") + String(pp.progress) + (pp.total ? " / " + String(pp.total) : "");
        });
      }).then(function (r) {
        prog.textContent = "Done.";
        out.appendChild(cvmui.content(r));
      }, function (e) {
        prog.textContent = "";
        out.appendChild(el("p", { "class": "error", role: "alert" }, "Failed: " + e.message));
      }).then(function () { btn.disabled = false; });
    });
    return form;
  }
})();

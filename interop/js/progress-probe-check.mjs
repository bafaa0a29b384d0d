// The official TypeScript MCP client, unchanged, against a scripted
// transport that delivers a call's three progress notifications and its
// response as a server across a relay would, in three ways; the progress
// probe measures each. Prints one JSON object: per case, the progress the
// client passed to onprogress and what the probe measured.
//
//   spaced:  the last progress, then the response 40 ms later, the event
//            loop free meanwhile (what cvm's settle window gives);
//   stalled: the same, but the event loop blocked for 60 ms across both
//            arrivals, so that one task reads both (a loaded client);
//   bunched: both in one task with the loop free (a peer that sends them
//            together).
import { performance } from 'node:perf_hooks';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
import { ProgressProbe } from './progress-probe.mjs';

const block = (ms) => {
  const end = performance.now() + ms;
  while (performance.now() < end) { /* the stall */ }
};

class ScriptedTransport {
  constructor(kind) {
    this.kind = kind;
  }

  async start() {}

  async close() {}

  async send(msg) {
    if (msg.method === 'initialize') {
      queueMicrotask(() => this.onmessage({
        jsonrpc: '2.0', id: msg.id,
        result: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: { tools: {} }, serverInfo: { name: 'scripted', version: '1' } },
      }));
    }
    if (msg.method !== 'tools/call') {
      return;
    }
    const progress = (n) => ({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: msg.params._meta.progressToken, progress: n, total: 3 } });
    const response = { jsonrpc: '2.0', id: msg.id, result: { content: [{ type: 'text', text: 'done' }] } };
    const later = (ms, f) => new Promise((resolve) => setTimeout(() => { f(); resolve(); }, ms));
    await later(5, () => this.onmessage(progress(1)));
    await later(5, () => this.onmessage(progress(2)));
    switch (this.kind) {
      case 'spaced':
        await later(5, () => this.onmessage(progress(3)));
        await later(40, () => this.onmessage(response));
        break;
      case 'stalled':
        // Both arrive while the loop is blocked; one read delivers them.
        await later(5, () => {
          block(60);
          this.onmessage(progress(3));
          this.onmessage(response);
        });
        break;
      case 'bunched':
        await later(5, () => {
          this.onmessage(progress(3));
          this.onmessage(response);
        });
        break;
    }
  }
}

const out = { ok: false };
try {
  for (const kind of ['spaced', 'stalled', 'bunched']) {
    const transport = new ScriptedTransport(kind);
    const client = new Client({ name: 'probe-check', version: '1' });
    const probe = new ProgressProbe(client, transport);
    await client.connect(transport);
    const progress = [];
    await probe.measure(() => client.callTool({ name: 'slow', arguments: {} }, undefined, { onprogress: (p) => progress.push(p.progress) }));
    out[kind] = { progress, progressProbe: probe.last };
    await client.close();
  }
  out.ok = true;
} catch (err) {
  out.error = err instanceof Error ? err.message : String(err);
}
console.log(JSON.stringify(out));
process.exit(out.ok ? 0 : 1);

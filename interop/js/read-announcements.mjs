// Reads a ContextVM server's announcements with nostr-tools and checks its
// CEP-15 claims with the reference SDK's hash, as a TypeScript client would.
// Prints one JSON object; the Go test decides.
//
// env: RELAY_URL, PUBKEY (hex)
// Output: {ok, events: {kind: {valid, tags, content}}, tools: [{name, claimed, computed}]}
import WebSocket from 'ws';
import { Relay, useWebSocketImplementation } from 'nostr-tools/relay';
import { verifyEvent } from 'nostr-tools/pure';
import { computeCommonSchemaHash } from '@contextvm/sdk';

useWebSocketImplementation(WebSocket);

const out = { ok: false, events: {}, tools: [] };
const killer = setTimeout(() => { out.error = 'timeout'; console.log(JSON.stringify(out)); process.exit(1); }, 15000);
try {
  const relay = await Relay.connect(process.env.RELAY_URL);
  const events = await new Promise((resolve) => {
    const got = [];
    const sub = relay.subscribe([{ authors: [process.env.PUBKEY], kinds: [11316, 11317, 11318, 11319, 11320, 10002] }], {
      onevent: (e) => got.push(e),
      oneose: () => { sub.close(); resolve(got); },
    });
  });
  for (const e of events) {
    out.events[e.kind] = { valid: verifyEvent(e), tags: e.tags, content: e.kind === 10002 ? e.content : JSON.parse(e.content) };
  }
  for (const tool of out.events[11317]?.content?.tools ?? []) {
    const claimed = tool._meta?.['io.contextvm/common-schema']?.schemaHash ?? null;
    const def = { name: tool.name, inputSchema: tool.inputSchema };
    if (tool.outputSchema) def.outputSchema = tool.outputSchema;
    out.tools.push({ name: tool.name, claimed, computed: computeCommonSchemaHash(def) });
  }
  relay.close();
  out.ok = true;
} catch (err) {
  out.error = err instanceof Error ? err.message : String(err);
}
clearTimeout(killer);
console.log(JSON.stringify(out));
process.exit(out.ok ? 0 : 1);

// Reads a ContextVM server's reviews with nostr-tools and CEP-24's
// discovery filter, as a TypeScript client would. Prints one JSON object;
// the Go test decides.
//
// env: RELAY_URL, PUBKEY (hex)
// Output: {ok, reviews: [{id, pubkey, valid, tags, content}]}
import WebSocket from 'ws';
import { Relay, useWebSocketImplementation } from 'nostr-tools/relay';
import { verifyEvent } from 'nostr-tools/pure';

useWebSocketImplementation(WebSocket);

const out = { ok: false, reviews: [] };
const killer = setTimeout(() => { out.error = 'timeout'; console.log(JSON.stringify(out)); process.exit(1); }, 15000);
try {
  const relay = await Relay.connect(process.env.RELAY_URL);
  const filter = { kinds: [1111], '#K': ['11316'], '#A': [`11316:${process.env.PUBKEY}:`] };
  const events = await new Promise((resolve) => {
    const got = [];
    const sub = relay.subscribe([filter], {
      onevent: (e) => got.push(e),
      oneose: () => { sub.close(); resolve(got); },
    });
  });
  for (const e of events) {
    out.reviews.push({ id: e.id, pubkey: e.pubkey, valid: verifyEvent(e), tags: e.tags, content: e.content });
  }
  relay.close();
  out.ok = true;
} catch (err) {
  out.error = err instanceof Error ? err.message : String(err);
}
clearTimeout(killer);
console.log(JSON.stringify(out));
process.exit(out.ok ? 0 : 1);

// Drives a relay with nostr-tools, a client nobody in this project wrote, and
// prints one JSON object describing what it saw. The Go test decides.
//
// env: RELAY_URL, GO_EVENT_ID (an event the Go side stored before the run)
import WebSocket from 'ws';
import { Relay, useWebSocketImplementation } from 'nostr-tools/relay';
import { finalizeEvent, generateSecretKey, getPublicKey, verifyEvent } from 'nostr-tools/pure';
import { fetchRelayInformation } from 'nostr-tools/nip11';

useWebSocketImplementation(WebSocket);

const url = process.env.RELAY_URL;
const out = {};
const sk = generateSecretKey();
const now = () => Math.floor(Date.now() / 1000);
const sign = (kind, content, tags = [], created_at = now()) =>
  finalizeEvent({ kind, content, tags, created_at }, sk);
const withTimeout = (p, ms, what) =>
  Promise.race([p, new Promise((_, rej) => setTimeout(() => rej(new Error(`timeout: ${what}`)), ms))]);

function query(relay, filter) {
  return withTimeout(new Promise((resolve) => {
    const got = [];
    const sub = relay.subscribe([filter], {
      onevent: (e) => got.push(e),
      oneose: () => { sub.close(); resolve(got); },
    });
  }), 5000, 'query');
}

try {
  const relay = await Relay.connect(url);
  out.connected = true;

  const note = sign(1, 'hello from nostr-tools', [['t', 'interop']]);
  out.noteReason = await relay.publish(note);
  out.noteID = note.id;
  out.tagQuery = (await query(relay, { kinds: [1], '#t': ['interop'] })).map((e) => e.id);

  // Replaceable: the later version wins; an older one published after does not.
  const t0 = now() - 10;
  await relay.publish(sign(10002, '', [['r', 'wss://one']], t0));
  await relay.publish(sign(10002, '', [['r', 'wss://two']], t0 + 5));
  try { await relay.publish(sign(10002, '', [['r', 'wss://old']], t0 - 5)); } catch {}
  out.replaceable = (await query(relay, { kinds: [10002], authors: [getPublicKey(sk)] }))
    .map((e) => e.tags[0][1]);

  // Ephemeral with a live #p subscription: only the matching one arrives.
  const me = getPublicKey(generateSecretKey());
  const other = getPublicKey(generateSecretKey());
  const live = [];
  let gotLive;
  const arrived = new Promise((r) => { gotLive = r; });
  await new Promise((resolve) => {
    relay.subscribe([{ kinds: [25910], '#p': [me], since: now() - 5 }], {
      onevent: (e) => { live.push(e.content); gotLive(); },
      oneose: resolve,
    });
  });
  try {
    out.unheardReason = await relay.publish(sign(25910, 'not for me', [['p', other]]));
  } catch (err) {
    out.unheardReason = String(err.message ?? err);
  }
  out.heardReason = await relay.publish(sign(25910, 'for me', [['p', me]]));
  await withTimeout(arrived, 5000, 'live ephemeral');
  await new Promise((r) => setTimeout(r, 200));
  out.live = live;
  out.ephemeralStored = (await query(relay, { kinds: [25910] })).length;

  // An event the Go side signed and stored verifies here.
  if (process.env.GO_EVENT_ID) {
    const [goEvent] = await query(relay, { ids: [process.env.GO_EVENT_ID] });
    out.goEventVerified = !!goEvent && verifyEvent(goEvent);
  }

  const httpURL = url.replace(/^ws/, 'http');
  const info = await fetchRelayInformation(httpURL);
  out.nip11 = { name: info.name, supported_nips: info.supported_nips };

  relay.close();
  out.ok = true;
} catch (err) {
  out.ok = false;
  out.error = String(err?.stack ?? err);
}
console.log(JSON.stringify(out));
process.exit(out.ok ? 0 : 1);

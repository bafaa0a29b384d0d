// The reference TypeScript ContextVM client paying for a tool through the
// reference SDK's own CEP-8 rail: the transport wrapped with
// withClientPayments and an LnBolt11NwcPaymentHandler on a Nostr Wallet
// Connect URI. Calls one tool (CALLS times, one after the other) and prints
// one JSON object: the results and every notification the client saw, as
// it saw it.
//
// env: RELAY_URL, SERVER_PUBKEY (hex or npub), NWC_URI, TOOL, ARGS (JSON),
//      CALLS (default 1), TIMEOUT_MS (default 20000), LOG_LEVEL.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  NostrClientTransport, PrivateKeySigner, ApplesauceRelayPool, withClientPayments, LnBolt11NwcPaymentHandler,
} from '@contextvm/sdk';
import { generateSecretKey } from 'nostr-tools/pure';
import { bytesToHex } from 'nostr-tools/utils';

const relays = (process.env.RELAY_URL ?? '').split(',').filter(Boolean);
const timeout = Number(process.env.TIMEOUT_MS ?? 20000);
const calls = Number(process.env.CALLS ?? 1);
const out = { ok: false, step: 'connect', notifications: [], errors: [], results: [] };
const finish = (code) => { console.log(JSON.stringify(out)); process.exit(code); };
setTimeout(() => { out.error = `overall timeout in step ${out.step}`; finish(1); }, timeout * (2 + calls));

try {
  const handler = new LnBolt11NwcPaymentHandler({ nwcConnectionString: process.env.NWC_URI, responseTimeoutMs: 15000 });
  const transport = withClientPayments(new NostrClientTransport({
    signer: new PrivateKeySigner(bytesToHex(generateSecretKey())),
    relayHandler: new ApplesauceRelayPool(relays),
    serverPubkey: process.env.SERVER_PUBKEY,
    logLevel: process.env.LOG_LEVEL ?? 'error',
  }), { handlers: [handler] });
  const client = new Client({ name: 'ts-pay-client', version: '1.0.0' });
  client.fallbackNotificationHandler = async (n) => { out.notifications.push({ method: n.method, params: n.params }); };
  client.onerror = (e) => out.errors.push(String(e?.message ?? e));
  await client.connect(transport, { timeout });
  for (let i = 0; i < calls; i++) {
    out.step = `call ${i + 1}`;
    const res = await client.callTool({ name: process.env.TOOL, arguments: JSON.parse(process.env.ARGS ?? '{}') }, undefined, { timeout });
    out.result = res;
    out.results.push(res);
  }
  out.ok = true;
  // process.exit ends the client and the wallet's relay connections.
  finish(0);
} catch (e) {
  out.error = String(e?.message ?? e);
  finish(1);
}

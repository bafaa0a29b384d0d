// A ContextVM client built on the reference TypeScript SDK, for interop
// tests. It runs initialize, tools/list and tools/call (echo, add, and slow
// with progress) against SERVER_PUBKEY and prints one JSON object.
//
// env: RELAY_URL (comma-separated), SERVER_PUBKEY (hex, npub or nprofile),
//      CLIENT_PRIVKEY (hex; random if unset), ENCRYPTION, GIFT_WRAP, STATELESS=1,
//      TIMEOUT_MS (per request, default 10000), LOG_LEVEL.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  NostrClientTransport, PrivateKeySigner, ApplesauceRelayPool, EncryptionMode, GiftWrapMode,
} from '@contextvm/sdk';
import { generateSecretKey, getPublicKey } from 'nostr-tools/pure';
import { bytesToHex, hexToBytes } from 'nostr-tools/utils';
import { ProgressProbe } from './progress-probe.mjs';

const relays = (process.env.RELAY_URL ?? '').split(',').filter(Boolean);
const sk = process.env.CLIENT_PRIVKEY ?? bytesToHex(generateSecretKey());
const timeout = Number(process.env.TIMEOUT_MS ?? 10000);
const encryptionMode = { optional: EncryptionMode.OPTIONAL, required: EncryptionMode.REQUIRED, disabled: EncryptionMode.DISABLED }[process.env.ENCRYPTION ?? 'optional'];
const giftWrapMode = { optional: GiftWrapMode.OPTIONAL, ephemeral: GiftWrapMode.EPHEMERAL, persistent: GiftWrapMode.PERSISTENT }[process.env.GIFT_WRAP ?? 'optional'];

const out = { ok: false, clientPubkey: getPublicKey(hexToBytes(sk)) };
const killer = setTimeout(() => {
  out.error = `overall timeout (${timeout * 4} ms)`;
  console.log(JSON.stringify(out));
  process.exit(1);
}, timeout * 4);

try {
  const transport = new NostrClientTransport({
    signer: new PrivateKeySigner(sk),
    relayHandler: new ApplesauceRelayPool(relays),
    serverPubkey: process.env.SERVER_PUBKEY,
    encryptionMode,
    giftWrapMode,
    isStateless: process.env.STATELESS === '1',
    logLevel: process.env.LOG_LEVEL ?? 'error',
  });
  const client = new Client({ name: 'ts-reference-client', version: '1.0.0' });
  const probe = new ProgressProbe(client, transport);
  const opts = { timeout };
  await client.connect(transport, opts);
  out.serverInfo = client.getServerVersion();
  out.protocolVersion = transport.getServerInitializeResult?.()?.protocolVersion;
  out.initTags = transport.getServerInitializeEvent?.()?.tags;
  out.tools = (await client.listTools({}, opts)).tools.map((t) => t.name).sort();
  const echo = await client.callTool({ name: 'echo', arguments: { text: 'héllo 🌍' } }, undefined, opts);
  out.echo = echo.content?.[0]?.text;
  const add = await client.callTool({ name: 'add', arguments: { a: 2, b: 3 } }, undefined, opts);
  out.add = add.structuredContent ?? add.content?.[0]?.text;
  if (out.tools.includes('slow')) {
    const progress = [];
    const slow = await probe.measure(() => client.callTool({ name: 'slow', arguments: { steps: 3, delayMs: Number(process.env.SLOW_DELAY_MS ?? 50) } }, undefined,
      { ...opts, onprogress: (p) => progress.push(p.progress) }));
    out.slow = slow.content?.[0]?.text;
    out.progress = progress;
    out.progressProbe = probe.last;
  }
  out.ok = true;
  await client.close();
} catch (err) {
  out.error = err instanceof Error ? err.message : String(err);
}
clearTimeout(killer);
console.log(JSON.stringify(out));
process.exit(out.ok ? 0 : 1);

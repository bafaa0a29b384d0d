// One-shot clients built on the reference TypeScript SDK against
// @modelcontextprotocol/server-everything behind a cvm gateway: N stateless
// clients (isStateless, CEP-35), one after another, each with a fresh key,
// call get-sum once (the last one trigger-long-running-operation too, for
// progress); then one stateful client makes the same get-sum call, for
// comparison. Prints one JSON object.
//
// env: RELAY_URL, SERVER_PUBKEY (hex, npub or nprofile), N (default 20),
//      TIMEOUT_MS (per request, default 15000), LOG_LEVEL.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { NostrClientTransport, PrivateKeySigner, ApplesauceRelayPool } from '@contextvm/sdk';
import { generateSecretKey } from 'nostr-tools/pure';
import { bytesToHex } from 'nostr-tools/utils';
import { ProgressProbe } from './progress-probe.mjs';

const relays = (process.env.RELAY_URL ?? '').split(',').filter(Boolean);
const n = Number(process.env.N ?? 20);
const timeout = Number(process.env.TIMEOUT_MS ?? 15000);
const out = { ok: false, sums: [], step: 'start' };
const killer = setTimeout(() => {
  out.error = `overall timeout in step ${out.step}`;
  console.log(JSON.stringify(out));
  process.exit(1);
}, timeout * (n + 4));

const text = (res) => (res.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');

// oneShot connects a client with a fresh key, runs f with it (and a
// progress probe) and closes it.
async function oneShot(isStateless, f) {
  const transport = new NostrClientTransport({
    signer: new PrivateKeySigner(bytesToHex(generateSecretKey())),
    relayHandler: new ApplesauceRelayPool(relays),
    serverPubkey: process.env.SERVER_PUBKEY,
    isStateless,
    logLevel: process.env.LOG_LEVEL ?? 'error',
  });
  const client = new Client({ name: 'ts-one-shot', version: '1.0.0' });
  const probe = new ProgressProbe(client, transport);
  await client.connect(transport, { timeout });
  try {
    return await f(client, probe);
  } finally {
    await client.close();
  }
}

const sum = (client, a) => client.callTool({ name: 'get-sum', arguments: { a, b: 1 } }, undefined, { timeout }).then(text);

try {
  for (let i = 0; i < n; i++) {
    out.step = `stateless client ${i}`;
    out.sums.push(await oneShot(true, async (client, probe) => {
      if (i === n - 1) {
        const progress = [];
        await probe.measure(() => client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 0.3, steps: 3 } }, undefined,
          { timeout, onprogress: (p) => progress.push(p.progress) }));
        out.progress = progress;
        out.progressProbe = probe.last;
      }
      return sum(client, i);
    }));
  }
  out.step = 'stateful client';
  out.statefulSum = await oneShot(false, (client) => sum(client, n - 1));
  out.ok = true;
} catch (err) {
  out.error = err instanceof Error ? err.message : String(err);
}
clearTimeout(killer);
console.log(JSON.stringify(out));
process.exit(out.ok ? 0 : 1);

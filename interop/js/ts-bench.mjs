// Load for the reference pair: the @contextvm/sdk client calling echo on a
// ContextVM server, sequentially and then from many clients at once.
// Prints one JSON object: {"sequentialMs":[...], "calls":N, "seconds":S}.
// With BLOB_SIZE set it instead calls blob BLOB_CALLS times in sequence and
// prints {"blobMs":[...], "bytes":N}: one large (CEP-22 fragmented) result
// per call.
//
// env: RELAY_URL, SERVER_PUBKEY, ENCRYPTION, CALLS (sequential, default 100),
//      CLIENTS (concurrent, default 16), DURATION_MS (default 5000),
//      BLOB_SIZE, BLOB_CALLS (default 5).
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { NostrClientTransport, PrivateKeySigner, ApplesauceRelayPool, EncryptionMode } from '@contextvm/sdk';
import { generateSecretKey } from 'nostr-tools/pure';
import { bytesToHex } from 'nostr-tools/utils';

const relays = [process.env.RELAY_URL];
const encryptionMode = { optional: EncryptionMode.OPTIONAL, required: EncryptionMode.REQUIRED, disabled: EncryptionMode.DISABLED }[process.env.ENCRYPTION ?? 'optional'];
const calls = Number(process.env.CALLS ?? 100);
const clients = Number(process.env.CLIENTS ?? 16);
const duration = Number(process.env.DURATION_MS ?? 5000);

async function connect() {
  const transport = new NostrClientTransport({
    signer: new PrivateKeySigner(bytesToHex(generateSecretKey())),
    relayHandler: new ApplesauceRelayPool(relays),
    serverPubkey: process.env.SERVER_PUBKEY,
    encryptionMode,
    logLevel: 'error',
  });
  const client = new Client({ name: 'ts-bench', version: '1.0.0' });
  await client.connect(transport, { timeout: 30000 });
  return client;
}
const echo = (client) => client.callTool({ name: 'echo', arguments: { text: 'bench' } }, undefined, { timeout: 30000 });

async function blobs(size, n) {
  const one = await connect();
  await echo(one);
  out.blobMs = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    // onprogress adds a progress token: the reference server fragments
    // only answers to requests that carry one, and otherwise publishes one
    // event too large for any relay, which the caller never hears about.
    const opts = { timeout: Number(process.env.TIMEOUT_MS ?? 30000), onprogress: () => {} };
    const res = await one.callTool({ name: 'blob', arguments: { size } }, undefined, opts);
    out.blobMs.push(performance.now() - t0);
    out.bytes = res.content[0].text.length;
    if (out.bytes !== size) throw new Error(`blob: ${out.bytes} bytes, want ${size}`);
  }
  await one.close();
}

const out = {};
try {
  if (process.env.BLOB_SIZE) {
    await blobs(Number(process.env.BLOB_SIZE), Number(process.env.BLOB_CALLS ?? 5));
    console.log(JSON.stringify(out));
    process.exit(0);
  }
  const one = await connect();
  for (let i = 0; i < 5; i++) await echo(one); // warm up
  out.sequentialMs = [];
  for (let i = 0; i < calls; i++) {
    const t0 = performance.now();
    await echo(one);
    out.sequentialMs.push(performance.now() - t0);
  }
  await one.close();

  const many = await Promise.all(Array.from({ length: clients }, connect));
  await Promise.all(many.map(echo));
  let done = 0;
  const t0 = performance.now();
  const end = t0 + duration;
  await Promise.all(many.map(async (c) => {
    while (performance.now() < end) { await echo(c); done++; }
  }));
  out.calls = done;
  out.seconds = (performance.now() - t0) / 1000;
  await Promise.all(many.map((c) => c.close()));
} catch (err) {
  out.error = String(err?.stack ?? err);
}
console.log(JSON.stringify(out));
process.exit(out.error ? 1 : 0);

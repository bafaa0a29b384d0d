// The reference client reads a CEP-41 open stream from the tool "count".
// Prints one JSON object: {"ok", "chunks": [...], "result"}.
//
// env: RELAY_URL, SERVER_PUBKEY, ENCRYPTION, CHUNKS (default 10), TIMEOUT_MS.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { NostrClientTransport, PrivateKeySigner, ApplesauceRelayPool, EncryptionMode, callToolStream } from '@contextvm/sdk';
import { generateSecretKey } from 'nostr-tools/pure';
import { bytesToHex } from 'nostr-tools/utils';

const out = { ok: false, chunks: [] };
const killer = setTimeout(() => { out.error = 'timeout'; console.log(JSON.stringify(out)); process.exit(1); }, Number(process.env.TIMEOUT_MS ?? 30000));
try {
  const transport = new NostrClientTransport({
    signer: new PrivateKeySigner(bytesToHex(generateSecretKey())),
    relayHandler: new ApplesauceRelayPool([process.env.RELAY_URL]),
    serverPubkey: process.env.SERVER_PUBKEY,
    encryptionMode: { optional: EncryptionMode.OPTIONAL, required: EncryptionMode.REQUIRED, disabled: EncryptionMode.DISABLED }[process.env.ENCRYPTION ?? 'optional'],
    openStream: { enabled: true },
    logLevel: process.env.LOG_LEVEL ?? 'error',
  });
  const client = new Client({ name: 'ts-stream', version: '1.0.0' });
  await client.connect(transport);
  const call = await callToolStream({ client, transport, name: 'count', arguments: { chunks: Number(process.env.CHUNKS ?? 10) } });
  for await (const chunk of call.stream) out.chunks.push(chunk.value);
  const res = await call.result;
  out.result = res.content?.[0]?.text;
  out.ok = true;
  await client.close();
} catch (err) {
  out.error = err instanceof Error ? err.message : String(err);
}
clearTimeout(killer);
console.log(JSON.stringify(out));
process.exit(out.ok ? 0 : 1);

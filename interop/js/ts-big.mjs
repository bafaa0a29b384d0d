// The reference client sends a large argument and receives a large result
// (CEP-22 both ways). It asks for progress: the reference fragments only
// requests that carry a progress token. Prints one JSON object.
//
// env: RELAY_URL, SERVER_PUBKEY, ENCRYPTION, SIZE (default 200000), TIMEOUT_MS,
//      MODE echo (send and receive SIZE) | send (send SIZE, receive its length)
//      | receive (send a number, receive SIZE bytes).
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { NostrClientTransport, PrivateKeySigner, ApplesauceRelayPool, EncryptionMode } from '@contextvm/sdk';
import { generateSecretKey } from 'nostr-tools/pure';
import { bytesToHex } from 'nostr-tools/utils';

const size = Number(process.env.SIZE ?? 200000);
const timeout = Number(process.env.TIMEOUT_MS ?? 30000);
const out = { ok: false };
try {
  const transport = new NostrClientTransport({
    signer: new PrivateKeySigner(bytesToHex(generateSecretKey())),
    relayHandler: new ApplesauceRelayPool([process.env.RELAY_URL]),
    serverPubkey: process.env.SERVER_PUBKEY,
    encryptionMode: { optional: EncryptionMode.OPTIONAL, required: EncryptionMode.REQUIRED, disabled: EncryptionMode.DISABLED }[process.env.ENCRYPTION ?? 'optional'],
    logLevel: process.env.LOG_LEVEL ?? 'error',
  });
  const client = new Client({ name: 'ts-big', version: '1.0.0' });
  await client.connect(transport, { timeout });
  let text = '';
  const unit = 'big "quoted" \\ 🌍 naïve <&> ';
  while (text.length < size) text += unit;
  const opts = { timeout, onprogress: () => {} };
  const mode = process.env.MODE ?? 'echo';
  if (mode === 'echo') {
    const back = (await client.callTool({ name: 'echo', arguments: { text } }, undefined, opts)).content?.[0]?.text ?? '';
    out.ok = back === text;
    out.received = back.length;
  } else if (mode === 'send') {
    const back = (await client.callTool({ name: 'length', arguments: { text } }, undefined, opts)).content?.[0]?.text;
    out.ok = back === String(text.length);
    out.received = Number(back);
  } else {
    const back = (await client.callTool({ name: 'blob', arguments: { size } }, undefined, opts)).content?.[0]?.text ?? '';
    out.ok = back.length === size;
    out.received = back.length;
  }
  out.sent = text.length;
  if (!out.ok && !out.error) out.error = 'wrong result';
  await client.close();
} catch (err) {
  out.error = err instanceof Error ? err.message : String(err);
}
console.log(JSON.stringify(out));
process.exit(out.ok ? 0 : 1);

// Wire vectors from the reference SDK (@contextvm/sdk) and nostr-tools, and
// the reference's verdict on vectors made by cvm. Prints one JSON object.
//
// env: SENDER_SK, RECIPIENT_SK (hex): the keys the reference signs and
//      decrypts with; GO_WRAPS: JSON array of gift wraps cvm made for the
//      recipient; GO_EVENTS: JSON array of kind 25910 events cvm signed.
import { encryptMessage, decryptMessage, mcpToNostrEvent, nostrEventToMcpMessage, PrivateKeySigner } from '@contextvm/sdk';
import { finalizeEvent, getPublicKey, verifyEvent } from 'nostr-tools/pure';
import { hexToBytes } from 'nostr-tools/utils';

const senderSk = hexToBytes(process.env.SENDER_SK);
const recipientSk = process.env.RECIPIENT_SK;
const recipient = getPublicKey(hexToBytes(recipientSk));
const sender = getPublicKey(senderSk);

const messages = [
  { jsonrpc: '2.0', id: 'init-xyz', method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'ts', version: '1' } } },
  { jsonrpc: '2.0', id: 77, method: 'tools/call', params: { name: 'echo', arguments: { text: 'héllo 🌍 "quoted" \\ back\nslash' } } },
  { jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 1, progress: 2, total: 3 } },
  { jsonrpc: '2.0', id: 78, result: { content: [{ type: 'text', text: '5' }], structuredContent: { sum: 5 } } },
  { jsonrpc: '2.0', id: 'x', error: { code: -32601, message: 'Method not found' } },
];

const out = { sender, recipient, events: [], wraps: [], goWraps: [], goEvents: [] };
for (const msg of messages) {
  const unsigned = mcpToNostrEvent(msg, sender, 25910, [['p', recipient]]);
  const signed = finalizeEvent(unsigned, senderSk);
  out.events.push({ message: msg, event: signed });
  for (const kind of [1059, 21059]) {
    out.wraps.push({ message: msg, wrap: encryptMessage(JSON.stringify(signed), recipient, kind) });
  }
}

const signer = new PrivateKeySigner(recipientSk);
for (const wrap of JSON.parse(process.env.GO_WRAPS ?? '[]')) {
  const verdict = { id: wrap.id, outerValid: verifyEvent(wrap) };
  try {
    const inner = JSON.parse(await decryptMessage(wrap, signer));
    verdict.innerValid = verifyEvent(inner);
    verdict.kind = inner.kind;
    verdict.pubkey = inner.pubkey;
    verdict.message = nostrEventToMcpMessage(inner);
  } catch (err) {
    verdict.error = String(err?.message ?? err);
  }
  out.goWraps.push(verdict);
}
for (const evt of JSON.parse(process.env.GO_EVENTS ?? '[]')) {
  out.goEvents.push({ id: evt.id, valid: verifyEvent(evt), message: nostrEventToMcpMessage(evt) });
}
console.log(JSON.stringify(out));

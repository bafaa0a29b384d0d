// A Nostr Wallet Connect service nobody here wrote: Alby's NWCWalletService
// (@getalby/sdk 8.0.3), backed by a small ledger kept here. Its wallets pay
// each other's invoices (real signed BOLT11 regtest invoices, made with the
// bolt11 package); an invoice from anywhere else is refused. Prints one JSON
// line when listening:
//   {"ready":true,"wallets":{"NAME":"nostr+walletconnect://…"}}
// and, on stderr, one JSON line per request it decrypts:
//   {"wallet":"NAME","encryption":"nip04"|"nip44_v2"}
//
// With NOTIFY=1 its info events offer payment_received notifications, and
// a payment settled sends the payee's connection one as kind 23197
// (NIP-44) and one as kind 23196 (NIP-04): the SDK has no sender for them,
// so this script builds them with the SDK's own encrypt and signEvent and
// publishes them through the SDK's pool. One JSON line on stderr per
// notification sent, accepted by the relay (someone listened) or not:
// {"notified":"NAME","kind":23197,"accepted":true,"payment_hash":"…"}.
//
// env: RELAY_URL, WALLETS ("NAME=SATS[:nip04],…"; ":nip04" publishes the
//      info event of a legacy wallet, without an encryption tag, so that
//      clients speak NIP-04 to it), NOTIFY=1.
import { randomBytes, createHash } from 'node:crypto';
import bolt11 from 'bolt11';
import { NWCWalletService, NWCWalletServiceKeyPair } from '@getalby/sdk';
import { finalizeEvent, getPublicKey } from 'nostr-tools/pure';
import WebSocket from 'ws';

globalThis.WebSocket ??= WebSocket;

const relay = process.env.RELAY_URL;
const methods = ['get_info', 'get_balance', 'make_invoice', 'pay_invoice', 'lookup_invoice'];
const regtest = { bech32: 'bcrt', pubKeyHash: 0x6f, scriptHash: 0xc4, validWitnessVersions: [0, 1] };
const hex = (b) => Buffer.from(b).toString('hex');
const now = () => Math.floor(Date.now() / 1000);

class LoggingService extends NWCWalletService {
  async decrypt(keypair, content, encryptionType) {
    console.error(JSON.stringify({ wallet: names.get(keypair.walletPubkey), encryption: encryptionType }));
    return super.decrypt(keypair, content, encryptionType);
  }
}

const notify = process.env.NOTIFY === '1';
const names = new Map(); // wallet pubkey → name
const connections = new Map(); // name → { keypair, walletSecret }

// notifyReceived tells the payee's connection of a payment it received.
async function notifyReceived(inv) {
  const conn = connections.get(inv.payee);
  if (!notify || !conn) return;
  const body = JSON.stringify({ notification_type: 'payment_received', notification: tx(inv) });
  for (const [kind, encryption] of [[23197, 'nip44_v2'], [23196, 'nip04']]) {
    const evt = await service.signEvent({
      kind, created_at: now(), tags: [['p', conn.keypair.clientPubkey]],
      content: await service.encrypt(conn.keypair, body, encryption),
    }, conn.walletSecret);
    // A relay refuses an ephemeral event nobody listens to: not an error.
    const accepted = await Promise.any(service.pool.publish([relay], evt)).then(() => true, () => false);
    console.error(JSON.stringify({ notified: inv.payee, kind, accepted, payment_hash: inv.hash }));
  }
}
const balances = new Map(); // name → msat
const invoices = new Map(); // payment hash → invoice record

const tx = (inv) => ({
  type: 'incoming',
  state: inv.settledAt ? 'settled' : 'pending',
  invoice: inv.invoice,
  description: inv.description,
  description_hash: '',
  preimage: inv.settledAt ? inv.preimage : '',
  payment_hash: inv.hash,
  amount: inv.amount,
  fees_paid: 0,
  created_at: inv.createdAt,
  expires_at: inv.expiresAt,
  settled_at: inv.settledAt,
});
const ok = (result) => ({ result, error: undefined });
const fail = (code, message) => ({ result: undefined, error: { code, message } });

function handler(name, nodeKey) {
  const nodePub = getPublicKey(nodeKey);
  return {
    getInfo: async () => ok({ alias: `alby-sdk ledger ${name}`, color: '#000000', pubkey: '02' + nodePub, network: 'regtest', block_height: 0, block_hash: '', methods, notifications: notify ? ['payment_received'] : [] }),
    getBalance: async () => ok({ balance: balances.get(name) }),
    makeInvoice: async ({ amount, description = '', expiry = 3600 }) => {
      const preimage = randomBytes(32);
      const hash = createHash('sha256').update(preimage).digest('hex');
      const createdAt = now();
      const unsigned = bolt11.encode({
        network: regtest, timestamp: createdAt, millisatoshis: String(amount),
        tags: [
          { tagName: 'payment_hash', data: hash },
          { tagName: 'payment_secret', data: hex(randomBytes(32)) },
          { tagName: 'feature_bits', data: { var_onion_optin: { required: true }, payment_secret: { required: true } } },
          { tagName: 'description', data: description },
          { tagName: 'expire_time', data: expiry },
        ],
      }, false);
      const invoice = bolt11.sign(unsigned, hex(nodeKey)).paymentRequest;
      const inv = { payee: name, invoice, hash, preimage: hex(preimage), amount, description, createdAt, expiresAt: createdAt + expiry };
      invoices.set(hash, inv);
      return ok(tx(inv));
    },
    payInvoice: async ({ invoice }) => {
      let decoded;
      try { decoded = bolt11.decode(invoice); } catch (e) { return fail('OTHER', `not an invoice: ${e.message}`); }
      const hash = decoded.tags.find((t) => t.tagName === 'payment_hash')?.data;
      const inv = invoices.get(hash);
      if (!inv || inv.invoice !== invoice) return fail('NOT_FOUND', 'this ledger pays only its own invoices');
      if (inv.settledAt) return fail('PAYMENT_FAILED', 'invoice already paid');
      if (now() >= inv.expiresAt) return fail('PAYMENT_FAILED', 'invoice expired');
      if (balances.get(name) < inv.amount) return fail('INSUFFICIENT_BALANCE', 'not enough sats');
      balances.set(name, balances.get(name) - inv.amount);
      balances.set(inv.payee, balances.get(inv.payee) + inv.amount);
      inv.settledAt = now();
      notifyReceived(inv).catch((e) => console.error(JSON.stringify({ notifyError: String(e?.message ?? e) })));
      return ok({ preimage: inv.preimage, fees_paid: 0 });
    },
    lookupInvoice: async ({ payment_hash, invoice }) => {
      const inv = payment_hash ? invoices.get(payment_hash) : [...invoices.values()].find((i) => i.invoice === invoice);
      return inv ? ok(tx(inv)) : fail('NOT_FOUND', 'no such invoice');
    },
  };
}

const service = new LoggingService({ relayUrls: [relay] });
const uris = {};
for (const spec of (process.env.WALLETS ?? '').split(',').filter(Boolean)) {
  const [nameSats, legacy] = spec.split(':');
  const [name, sats] = nameSats.split('=');
  const walletSecret = hex(randomBytes(32));
  const clientSecret = hex(randomBytes(32));
  const keypair = new NWCWalletServiceKeyPair(walletSecret, getPublicKey(Buffer.from(clientSecret, 'hex')));
  names.set(keypair.walletPubkey, name);
  connections.set(name, { keypair, walletSecret });
  balances.set(name, Number(sats) * 1000);
  await service.subscribe(keypair, handler(name, randomBytes(32)));
  if (legacy === 'nip04') {
    const info = finalizeEvent({
      kind: 13194, created_at: now(), tags: notify ? [['notifications', 'payment_received']] : [],
      content: [...methods, ...(notify ? ['notifications'] : [])].join(' '),
    }, Buffer.from(walletSecret, 'hex'));
    await Promise.any(service.pool.publish([relay], info));
  } else {
    await service.publishWalletServiceInfoEvent(walletSecret, notify ? [...methods, 'notifications'] : methods, notify ? ['payment_received'] : []);
  }
  uris[name] = `nostr+walletconnect://${keypair.walletPubkey}?relay=${encodeURIComponent(relay)}&secret=${clientSecret}`;
}
// subscribe() does not wait for the relay's EOSE; give the subscriptions
// a moment to reach it before clients are told to go ahead.
await new Promise((r) => setTimeout(r, 500));
console.log(JSON.stringify({ ready: true, wallets: uris }));

const stop = () => { try { service.close(); } finally { process.exit(0); } };
process.on('SIGINT', stop);
process.on('SIGTERM', stop);

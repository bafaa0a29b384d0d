// Alby's NWCClient (@getalby/sdk 8.0.3) reading a wallet service's NIP-47
// notifications through its own subscribeNotifications: the payee listens
// for payment_received and the payer for payment_sent, the payee makes an
// invoice, the payer pays it, and each waits for its notification of that
// payment hash. Prints one JSON object: both notifications as the SDK
// delivered them and the encryption it chose.
//
// env: PAYER_URI, PAYEE_URI (nostr+walletconnect://…), AMOUNT_MSAT.
import { NWCClient } from '@getalby/sdk';
import WebSocket from 'ws';

globalThis.WebSocket ??= WebSocket;

const out = { ok: false, step: 'connect' };
const finish = (code) => { console.log(JSON.stringify(out)); process.exit(code); };
setTimeout(() => { out.error = `overall timeout in step ${out.step}`; finish(1); }, 60000);

// waitFor resolves once cond() holds, checking at every turn of the event
// loop's timers: a condition, not a guess at how long it takes.
const waitFor = (cond) => new Promise((resolve) => {
  const check = () => (cond() ? resolve() : setTimeout(check, 5));
  check();
});

// subscribed: the client's pool has sent the REQ of a notification
// subscription (kind 23196 or 23197) on a connected relay. Requests the
// client sends later go after it on the same connection, so the relay has
// the subscription before the wallet can answer them, let alone notify.
const subscribed = (client) => [...client.pool.relays.values()].some((relay) => relay.connected &&
  [...relay.openSubs.values()].some((sub) => sub.filters.some((f) => (f.kinds ?? []).some((k) => k === 23196 || k === 23197))));

try {
  const payer = new NWCClient({ nostrWalletConnectUrl: process.env.PAYER_URI });
  const payee = new NWCClient({ nostrWalletConnectUrl: process.env.PAYEE_URI });
  const heard = { received: [], sent: [] };
  out.step = 'subscribe';
  await payee.subscribeNotifications((n) => heard.received.push(n), ['payment_received']);
  await payer.subscribeNotifications((n) => heard.sent.push(n), ['payment_sent']);
  await waitFor(() => subscribed(payee) && subscribed(payer));
  out.encryption = payee.encryptionType;
  out.step = 'make_invoice';
  const made = await payee.makeInvoice({ amount: Number(process.env.AMOUNT_MSAT), description: 'alby notifications', expiry: 600 });
  out.paymentHash = made.payment_hash;
  out.step = 'pay_invoice';
  out.paid = await payer.payInvoice({ invoice: made.invoice });
  out.step = 'notifications';
  const mine = (list) => list.find((n) => n.notification?.payment_hash === made.payment_hash);
  await waitFor(() => mine(heard.received) && mine(heard.sent));
  out.received = mine(heard.received);
  out.sent = mine(heard.sent);
  out.ok = true;
  finish(0);
} catch (e) {
  out.error = String(e?.message ?? e);
  out.code = e?.code;
  finish(1);
}

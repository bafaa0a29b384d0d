// Alby's NWCClient (@getalby/sdk 8.0.3) driving a Nostr Wallet Connect
// service: get_info, get_balance, make_invoice (on the payee's
// connection), pay_invoice (on the payer's), lookup_invoice, get_balance
// again. Prints one JSON object with every answer and the encryption the
// client chose from the wallet's info event.
//
// env: PAYER_URI, PAYEE_URI (nostr+walletconnect://…), AMOUNT_MSAT.
import { NWCClient } from '@getalby/sdk';
import WebSocket from 'ws';

// Node 20 has no global WebSocket; nostr-tools (under the SDK) needs one.
globalThis.WebSocket ??= WebSocket;

const out = { ok: false, step: 'connect' };
const finish = (code) => { console.log(JSON.stringify(out)); process.exit(code); };
setTimeout(() => { out.error = `overall timeout in step ${out.step}`; finish(1); }, 60000);

try {
  const payer = new NWCClient({ nostrWalletConnectUrl: process.env.PAYER_URI });
  const payee = new NWCClient({ nostrWalletConnectUrl: process.env.PAYEE_URI });
  out.step = 'get_info';
  out.info = await payer.getInfo();
  out.encryption = payer.encryptionType;
  out.step = 'get_balance';
  out.balanceBefore = (await payer.getBalance()).balance;
  out.step = 'make_invoice';
  out.made = await payee.makeInvoice({ amount: Number(process.env.AMOUNT_MSAT), description: 'alby interop', expiry: 600 });
  out.payeeEncryption = payee.encryptionType;
  out.step = 'pay_invoice';
  out.paid = await payer.payInvoice({ invoice: out.made.invoice });
  out.step = 'lookup_invoice';
  out.looked = await payee.lookupInvoice({ payment_hash: out.made.payment_hash });
  out.step = 'get_balance after';
  out.balanceAfter = (await payer.getBalance()).balance;
  out.payeeBalance = (await payee.getBalance()).balance;
  out.step = 'pay again';
  try {
    await payer.payInvoice({ invoice: out.made.invoice });
    out.secondPay = 'paid';
  } catch (e) {
    out.secondPay = String(e?.code ?? e?.message ?? e);
  }
  out.ok = true;
  finish(0);
} catch (e) {
  out.error = String(e?.message ?? e);
  out.code = e?.code;
  finish(1);
}

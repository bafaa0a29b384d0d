// The reference client's free and paid calls, timed, for bench/cvmbench:
// the @contextvm/sdk client wrapped with withClientPayments and an
// LnBolt11NwcPaymentHandler on a Nostr Wallet Connect URI (the SDK's
// defaults otherwise), calling FREE_TOOL and PAID_TOOL in turn, once each to
// warm up and then CALLS times each. Prints one JSON object:
//   {"freeMs":[...],"paidMs":[...]} or {"error":"..."}
// (bench/cvmbench checks on the server's wallet that each call was paid).
//
// env: RELAY_URL, SERVER_PUBKEY (hex or npub), NWC_URI, CALLS (default 10),
//      FREE_TOOL, FREE_ARGS, PAID_TOOL, PAID_ARGS (JSON), WANT_SUM (the paid
//      tool's structuredContent.sum), TIMEOUT_MS (per call, default 30000).
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  NostrClientTransport, PrivateKeySigner, ApplesauceRelayPool, withClientPayments, LnBolt11NwcPaymentHandler,
} from '@contextvm/sdk';
import { generateSecretKey } from 'nostr-tools/pure';
import { bytesToHex } from 'nostr-tools/utils';

const calls = Number(process.env.CALLS ?? 10);
const timeout = Number(process.env.TIMEOUT_MS ?? 30000);
const out = { freeMs: [], paidMs: [] };
const finish = (code) => { console.log(JSON.stringify(out)); process.exit(code); };

try {
  const transport = withClientPayments(new NostrClientTransport({
    signer: new PrivateKeySigner(bytesToHex(generateSecretKey())),
    relayHandler: new ApplesauceRelayPool([process.env.RELAY_URL]),
    serverPubkey: process.env.SERVER_PUBKEY,
    logLevel: 'error',
  }), { handlers: [new LnBolt11NwcPaymentHandler({ nwcConnectionString: process.env.NWC_URI })] });
  const client = new Client({ name: 'bench-pay-client', version: '1.0.0' });
  await client.connect(transport, { timeout });
  // One call, timed into times (not when null); a paid call must answer
  // structuredContent.sum WANT_SUM, so that a figure is never a refusal's.
  const call = async (times, name, args, wantSum) => {
    const t0 = performance.now();
    const res = await client.callTool({ name, arguments: JSON.parse(args ?? '{}') }, undefined, { timeout });
    times?.push(performance.now() - t0);
    if (res.isError || (wantSum !== undefined && res.structuredContent?.sum !== Number(wantSum))) {
      throw new Error(`${name}: ${JSON.stringify(res)}`);
    }
  };
  const free = (times) => call(times, process.env.FREE_TOOL, process.env.FREE_ARGS);
  const paid = (times) => call(times, process.env.PAID_TOOL, process.env.PAID_ARGS, process.env.WANT_SUM);
  await free(null);
  await paid(null);
  for (let i = 0; i < calls; i++) {
    await free(out.freeMs);
    await paid(out.paidMs);
  }
  finish(0);
} catch (e) {
  out.error = String(e?.stack ?? e);
  finish(1);
}

// A ContextVM server built on the reference TypeScript SDK (@contextvm/sdk),
// for interop tests. Prints one JSON line when listening:
//   {"ready":true,"pubkey":"<hex>"}
//
// env: RELAY_URL (comma-separated), SERVER_PRIVKEY (hex; random if unset),
//      ENCRYPTION optional|required|disabled, GIFT_WRAP optional|ephemeral|persistent,
//      ANNOUNCE=1 (CEP-6 announcements to RELAY_URL only), PRICE_ADD (sats, a cap tag),
//      COMMON_TOOLS (comma-separated tool names declared common, CEP-15),
//      CATEGORIES (comma-separated, with COMMON_TOOLS), INJECT_PUBKEY=1, LOG_LEVEL,
//      NWC_URI (with PRICE_ADD: add is charged for through the SDK's own CEP-8 rail,
//      withServerPayments + LnBolt11NwcPaymentProcessor on that wallet),
//      NWC_VERIFY=poll (the processor polls lookup_invoice instead of its default),
//      ZAP_ADDRESS (with PRICE_ADD: add is charged for as NIP-57 zaps to that Lightning
//      address through the SDK's LnBolt11ZapPaymentProcessor, its receipts read on
//      RELAY_URL; Node must trust the address's certificate: NODE_EXTRA_CA_CERTS),
//      PROFILE_JSON (with ANNOUNCE=1: the SDK's profileMetadata, a kind 0, CEP-23).
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import {
  NostrServerTransport, PrivateKeySigner, ApplesauceRelayPool, EncryptionMode, GiftWrapMode, withCommonToolSchemas,
  withServerPayments, LnBolt11NwcPaymentProcessor, LnBolt11ZapPaymentProcessor,
} from '@contextvm/sdk';
import { generateSecretKey, getPublicKey } from 'nostr-tools/pure';
import { bytesToHex, hexToBytes } from 'nostr-tools/utils';

const relays = (process.env.RELAY_URL ?? '').split(',').filter(Boolean);
if (relays.length === 0) { console.error('RELAY_URL is required'); process.exit(2); }
const sk = process.env.SERVER_PRIVKEY ?? bytesToHex(generateSecretKey());
const encryptionMode = { optional: EncryptionMode.OPTIONAL, required: EncryptionMode.REQUIRED, disabled: EncryptionMode.DISABLED }[process.env.ENCRYPTION ?? 'optional'];
const giftWrapMode = { optional: GiftWrapMode.OPTIONAL, ephemeral: GiftWrapMode.EPHEMERAL, persistent: GiftWrapMode.PERSISTENT }[process.env.GIFT_WRAP ?? 'optional'];
if (encryptionMode === undefined || giftWrapMode === undefined) { console.error('bad ENCRYPTION or GIFT_WRAP'); process.exit(2); }

const mcp = new McpServer({ name: 'ts-reference-server', version: '1.0.0' });
mcp.registerTool('echo', { description: 'Echo the text', inputSchema: { text: z.string() } },
  async ({ text }) => ({ content: [{ type: 'text', text }] }));
mcp.registerTool('add', { description: 'Add two numbers', inputSchema: { a: z.number(), b: z.number() } },
  async ({ a, b }) => ({ content: [{ type: 'text', text: String(a + b) }], structuredContent: { sum: a + b } }));
mcp.registerTool('slow', { description: 'Report progress, then finish', inputSchema: { steps: z.number().optional(), delayMs: z.number().optional() } },
  async ({ steps = 3, delayMs = 50 }, extra) => {
    const token = extra?._meta?.progressToken;
    for (let i = 1; i <= steps; i++) {
      if (token !== undefined) {
        await extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress: i, total: steps } });
      }
      if (delayMs > 0) await new Promise((r) => setTimeout(r, delayMs));
    }
    return { content: [{ type: 'text', text: 'done' }] };
  });
mcp.registerTool('blob', { description: 'Return size bytes of text', inputSchema: { size: z.number() } },
  async ({ size }) => ({ content: [{ type: 'text', text: 'x'.repeat(size) }] }));
mcp.registerTool('length', { description: 'The length of the text', inputSchema: { text: z.string() } },
  async ({ text }) => ({ content: [{ type: 'text', text: String(text.length) }] }));
// CEP-41: with OPEN_STREAM=1 the SDK hands tools a writer in _meta.stream.
mcp.registerTool('count', { description: 'Stream chunks, then return', inputSchema: { chunks: z.number() } },
  async ({ chunks }, extra) => {
    const stream = extra?._meta?.stream;
    if (!stream) return { content: [{ type: 'text', text: 'no stream' }] };
    for (let i = 0; i < chunks; i++) await stream.write(`chunk ${i}`);
    await stream.close();
    return { content: [{ type: 'text', text: `${chunks} chunks` }] };
  });
mcp.registerTool('whoami', { description: 'The injected client pubkey', inputSchema: {} },
  async (_args, extra) => ({ content: [{ type: 'text', text: String(extra?._meta?.clientPubkey ?? '') }] }));

const transport = new NostrServerTransport({
  signer: new PrivateKeySigner(sk),
  relayHandler: new ApplesauceRelayPool(relays),
  encryptionMode,
  giftWrapMode,
  serverInfo: { name: 'TS Reference Server', about: 'interop peer', website: 'http://127.0.0.1/' },
  isAnnouncedServer: process.env.ANNOUNCE === '1',
  bootstrapRelayUrls: [],
  publishRelayList: process.env.ANNOUNCE === '1',
  injectClientPubkey: process.env.INJECT_PUBKEY === '1',
  openStream: { enabled: process.env.OPEN_STREAM === '1' },
  logLevel: process.env.LOG_LEVEL ?? 'error',
  profileMetadata: process.env.PROFILE_JSON ? JSON.parse(process.env.PROFILE_JSON) : undefined,
});
const addPrice = [{ method: 'tools/call', name: 'add', amount: Number(process.env.PRICE_ADD), currencyUnit: 'sats', description: 'add two numbers' }];
if (process.env.PRICE_ADD && process.env.ZAP_ADDRESS) {
  withServerPayments(transport, {
    // Its default relays are public: the receipts are read on the test's.
    processors: [new LnBolt11ZapPaymentProcessor({ lnAddress: process.env.ZAP_ADDRESS, relayUrls: relays })],
    pricedCapabilities: addPrice,
  });
} else if (process.env.PRICE_ADD && process.env.NWC_URI) {
  withServerPayments(transport, {
    processors: [new LnBolt11NwcPaymentProcessor({
      nwcConnectionString: process.env.NWC_URI,
      // Unset, the processor reads the wallet's info event and waits for its
      // payment notifications when it offers them (the SDK's default).
      enableNotificationVerification: process.env.NWC_VERIFY === 'poll' ? false : undefined,
      responseTimeoutMs: 15000,
    })],
    pricedCapabilities: addPrice,
  });
} else if (process.env.PRICE_ADD) {
  transport.setAnnouncementPricingTags([['cap', 'tool:add', String(process.env.PRICE_ADD), 'sats']]);
}
if (process.env.COMMON_TOOLS) {
  withCommonToolSchemas(transport, {
    tools: process.env.COMMON_TOOLS.split(',').map((name) => ({ name })),
    categories: (process.env.CATEGORIES ?? '').split(',').filter(Boolean),
  });
}
await mcp.connect(transport);
// connect() resolves before the SDK's subscription reaches the relay; a
// request sent in between is lost. Relays that answer "mute" let the Go
// harness wait for the subscription itself; for the others, give it a moment.
await new Promise((r) => setTimeout(r, Number(process.env.READY_DELAY_MS ?? 0)));
console.log(JSON.stringify({ ready: true, pubkey: getPublicKey(hexToBytes(sk)) }));

const stop = async () => { try { await mcp.close(); } finally { process.exit(0); } };
process.on('SIGINT', stop);
process.on('SIGTERM', stop);

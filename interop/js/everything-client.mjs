// The reference TypeScript ContextVM client against
// @modelcontextprotocol/server-everything behind a cvm gateway. It exercises
// tools, progress, resources (a template and a subscription), prompts and
// completion, then prints one JSON object.
//
// Requests from the server to the client (sampling, elicitation, roots) are
// not tried here: @contextvm/sdk 0.11.14's client transport drops every
// JSON-RPC request it receives ("Received unsupported JSON-RPC message
// type"). stdio-host.mjs makes those round trips through cvm proxy.
//
// env: RELAY_URL, SERVER_PUBKEY (hex, npub or nprofile),
//      TIMEOUT_MS (per request, default 15000), LOG_LEVEL.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { NostrClientTransport, PrivateKeySigner, ApplesauceRelayPool } from '@contextvm/sdk';
import { generateSecretKey } from 'nostr-tools/pure';
import { bytesToHex } from 'nostr-tools/utils';
import { ProgressProbe } from './progress-probe.mjs';

const relays = (process.env.RELAY_URL ?? '').split(',').filter(Boolean);
const timeout = Number(process.env.TIMEOUT_MS ?? 15000);
const out = { ok: false, step: 'connect' };
const killer = setTimeout(() => {
  out.error = `overall timeout in step ${out.step}`;
  console.log(JSON.stringify(out));
  process.exit(1);
}, timeout * 6);

const text = (res) => (res.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');

try {
  const transport = new NostrClientTransport({
    signer: new PrivateKeySigner(bytesToHex(generateSecretKey())),
    relayHandler: new ApplesauceRelayPool(relays),
    serverPubkey: process.env.SERVER_PUBKEY,
    logLevel: process.env.LOG_LEVEL ?? 'error',
  });
  const client = new Client({ name: 'ts-everything-client', version: '1.0.0' });
  const probe = new ProgressProbe(client, transport);
  const updated = [];
  let onUpdate;
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => { updated.push(n.params.uri); onUpdate?.(); });
  const opts = { timeout };
  await client.connect(transport, opts);
  out.serverInfo = client.getServerVersion();
  out.hasInstructions = (client.getInstructions() ?? '').length > 0;
  out.capabilities = client.getServerCapabilities();

  out.step = 'tools';
  out.tools = (await client.listTools({}, opts)).tools.map((t) => t.name).sort();
  out.echo = text(await client.callTool({ name: 'echo', arguments: { message: 'héllo 🌍' } }, undefined, opts));
  out.sum = text(await client.callTool({ name: 'get-sum', arguments: { a: 2, b: 3 } }, undefined, opts));

  out.step = 'progress';
  const progress = [];
  await probe.measure(() => client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 0.3, steps: 3 } }, undefined,
    { ...opts, onprogress: (p) => progress.push(p.progress) }));
  out.progress = progress;
  out.progressProbe = probe.last;

  out.step = 'resources';
  const resources = (await client.listResources({}, opts)).resources;
  out.resourceCount = resources.length;
  out.templates = (await client.listResourceTemplates({}, opts)).resourceTemplates.map((t) => t.uriTemplate).sort();
  const read = await client.readResource({ uri: 'demo://resource/dynamic/text/7' }, opts);
  out.templateRead = read.contents[0].text;

  out.step = 'subscription';
  const watched = 'demo://resource/dynamic/text/7';
  await client.subscribeResource({ uri: watched }, opts);
  const gotUpdate = new Promise((resolve) => { onUpdate = resolve; if (updated.length) resolve(); });
  await client.callTool({ name: 'toggle-subscriber-updates', arguments: {} }, undefined, opts);
  await Promise.race([gotUpdate, new Promise((r) => setTimeout(r, timeout))]);
  await client.callTool({ name: 'toggle-subscriber-updates', arguments: {} }, undefined, opts);
  await client.unsubscribeResource({ uri: watched }, opts);
  out.updated = [...new Set(updated)];

  out.step = 'prompts';
  out.prompts = (await client.listPrompts({}, opts)).prompts.map((p) => p.name).sort();
  const simple = await client.getPrompt({ name: 'simple-prompt' }, opts);
  out.simplePrompt = simple.messages[0].content.text;
  const args = await client.getPrompt({ name: 'args-prompt', arguments: { city: 'Lyon' } }, opts);
  out.argsPrompt = args.messages[0].content.text;

  out.step = 'completion';
  const completion = await client.complete({
    ref: { type: 'ref/prompt', name: 'completable-prompt' },
    argument: { name: 'department', value: 'E' },
  }, opts);
  out.completion = completion.completion.values;
  out.step = 'done';
  out.ok = true;
  await client.close();
} catch (err) {
  out.error = err instanceof Error ? err.message : String(err);
}
clearTimeout(killer);
console.log(JSON.stringify(out));
process.exit(out.ok ? 0 : 1);

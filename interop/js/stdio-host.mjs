// An MCP host as Claude Desktop is one: the official TypeScript MCP client
// starting `cvm proxy SERVER` as a stdio server (StdioClientTransport). It
// lists the tools, makes the calls of CALLS and prints one JSON object.
//
// Requests from the server reach the host through the proxy; CAPS says which
// it declares and answers: sampling ("sampled: PROMPT"), elicitation (accept,
// name "Ada Lovelace"), roots (file:///tmp/cvm-interop-root).
//
// env: CVM_BIN (the cvm binary), SERVER (pubkey), RELAY_URL, CVM_HOME (HOME of
//      the proxy), CALLS (JSON: [{"name":…,"arguments":{…},"progress":true}]),
//      CAPS (comma-separated: sampling,elicitation,roots), TIMEOUT_MS.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import {
  CreateMessageRequestSchema, ElicitRequestSchema, ListRootsRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { ProgressProbe } from './progress-probe.mjs';

const timeout = Number(process.env.TIMEOUT_MS ?? 15000);
const out = { ok: false };
const killer = setTimeout(() => {
  out.error = 'overall timeout';
  console.log(JSON.stringify(out));
  process.exit(1);
}, timeout * 4);

try {
  const transport = new StdioClientTransport({
    command: process.env.CVM_BIN,
    args: ['proxy', process.env.SERVER, '--relay', process.env.RELAY_URL, '--log-level', 'debug'],
    env: { PATH: process.env.PATH, HOME: process.env.CVM_HOME, XDG_CONFIG_HOME: `${process.env.CVM_HOME}/config` },
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (d) => { stderr += d; });
  const caps = (process.env.CAPS ?? '').split(',').filter(Boolean);
  const capabilities = {};
  if (caps.includes('sampling')) capabilities.sampling = {};
  if (caps.includes('elicitation')) capabilities.elicitation = {};
  if (caps.includes('roots')) capabilities.roots = { listChanged: true };
  const client = new Client({ name: 'stdio-host', version: '1.0.0' }, { capabilities });
  if (caps.includes('sampling')) {
    client.setRequestHandler(CreateMessageRequestSchema, async (req) => ({
      model: 'host-model', role: 'assistant',
      content: { type: 'text', text: `sampled: ${req.params.messages[0].content.text}` },
    }));
  }
  if (caps.includes('elicitation')) {
    client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: { name: 'Ada Lovelace', check: true } }));
  }
  if (caps.includes('roots')) {
    client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: [{ uri: 'file:///tmp/cvm-interop-root', name: 'interop' }] }));
  }
  const probe = new ProgressProbe(client, transport);
  const opts = { timeout };
  await client.connect(transport, opts);
  out.serverInfo = client.getServerVersion();
  out.tools = (await client.listTools({}, opts)).tools.map((t) => t.name).sort();
  out.results = [];
  for (const call of JSON.parse(process.env.CALLS ?? '[]')) {
    const progress = [];
    const res = await probe.measure(() => client.callTool({ name: call.name, arguments: call.arguments }, undefined,
      call.progress ? { ...opts, onprogress: (p) => progress.push(p.progress) } : opts));
    out.results.push({
      text: (res.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n'),
      structured: res.structuredContent, isError: res.isError ?? false, progress, progressProbe: probe.last,
    });
  }
  await client.close();
  out.proxyLoggedToStderr = stderr.includes('proxy ready');
  out.ok = true;
} catch (err) {
  out.error = err instanceof Error ? err.message : String(err);
}
clearTimeout(killer);
console.log(JSON.stringify(out));
process.exit(out.ok ? 0 : 1);

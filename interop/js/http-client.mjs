// The official TypeScript MCP client over streamable HTTP against
// `cvm gateway --http`: a client that knows nothing of NIP-10 (no DID, no
// quotations). It lists the tools, calls a free one, and reports the HTTP
// status and body of a refusal, then prints one JSON object.
//
// env: MCP_URL, TOOL, ARGS (JSON), EXPECT_REFUSAL ("1": the connection is
// expected to be refused, and the refusal is what is reported).
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const out = { ok: false, step: 'connect' };
const killer = setTimeout(() => {
  out.error = `overall timeout in step ${out.step}`;
  console.log(JSON.stringify(out));
  process.exit(1);
}, 30000);

try {
  const url = new URL(process.env.MCP_URL);
  const client = new Client({ name: 'ts-http-client', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(url);
  try {
    await client.connect(transport);
  } catch (err) {
    out.connectError = String(err?.message ?? err);
    out.connectCode = err?.code;
    // The refusal as the server sent it, with the same request.
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'ts-http-client', version: '1.0.0' } } }),
    });
    out.status = res.status;
    out.body = await res.json().catch(() => null);
    out.ok = process.env.EXPECT_REFUSAL === '1';
    throw null;
  }
  out.capabilities = client.getServerCapabilities();
  out.step = 'tools';
  out.tools = (await client.listTools()).tools.map((t) => t.name).sort();
  const res = await client.callTool({ name: process.env.TOOL, arguments: JSON.parse(process.env.ARGS ?? '{}') });
  out.result = res.structuredContent ?? res.content;
  out.isError = res.isError ?? false;
  await client.close();
  out.ok = true;
} catch (err) {
  if (err !== null) out.error = String(err?.stack ?? err);
}
clearTimeout(killer);
console.log(JSON.stringify(out));
process.exit(0);

// An agent's host driving `cvm market`: the official TypeScript MCP client
// starts it as a stdio server (StdioClientTransport), prints one JSON ready
// line with the market's tools, then calls one market tool per line of
// stdin ({"tool", "arguments"}) and prints each answer as one JSON line
// ({"result"} or {"error"}), so that the test can act between calls.
//
// env: CVM_BIN (the cvm binary), MARKET_ARGS (JSON array: cvm's arguments),
//      CVM_HOME (HOME of the market), TIMEOUT_MS.
import readline from 'node:readline';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const timeout = Number(process.env.TIMEOUT_MS ?? 60000);
const home = process.env.CVM_HOME;
const transport = new StdioClientTransport({
  command: process.env.CVM_BIN,
  args: JSON.parse(process.env.MARKET_ARGS),
  env: {
    PATH: process.env.PATH, HOME: home, XDG_CONFIG_HOME: `${home}/config`,
    XDG_DATA_HOME: `${home}/data`, XDG_CACHE_HOME: `${home}/cache`,
  },
  stderr: 'pipe',
});
let stderr = '';
transport.stderr?.on('data', (d) => { stderr += d; });
const client = new Client({ name: 'market-host', version: '1.0.0' }, { capabilities: {} });
try {
  await client.connect(transport, { timeout });
  const tools = (await client.listTools({}, { timeout })).tools.map((t) => t.name).sort();
  console.log(JSON.stringify({ ready: true, tools, server: client.getServerVersion() }));
} catch (e) {
  console.log(JSON.stringify({ ready: false, error: String(e), stderr }));
  process.exit(1);
}
for await (const line of readline.createInterface({ input: process.stdin })) {
  const { tool, arguments: args } = JSON.parse(line);
  try {
    const result = await client.callTool({ name: tool, arguments: args }, undefined, { timeout });
    console.log(JSON.stringify({ result }));
  } catch (e) {
    console.log(JSON.stringify({ error: String(e), stderr }));
  }
}
await client.close();

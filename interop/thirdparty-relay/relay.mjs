// A loopback Nostr relay on @nostr-relay/core, a relay implementation nobody
// in this project wrote. It prints one JSON line when ready:
//   {"ready":true,"url":"ws://127.0.0.1:PORT"}
//
// env: TAG_FILTERS=live (default) makes live subscriptions honour "#x" tag
//      filters; @nostr-relay/common 0.0.40 ignores them, so every subscriber
//      gets every event of a matching kind. TAG_FILTERS=off keeps that
//      behaviour, to test peers that must check the "p" tag themselves.
import { WebSocketServer } from 'ws';
import { NostrRelay } from '@nostr-relay/core';
import { EventRepository, EventUtils } from '@nostr-relay/common';

const tagFiltersLive = (process.env.TAG_FILTERS ?? 'live') !== 'off';

function matches(filter, event) {
  if (filter.ids && !filter.ids.includes(event.id)) return false;
  if (filter.authors && !filter.authors.includes(event.pubkey)) return false;
  if (filter.kinds && !filter.kinds.includes(event.kind)) return false;
  if (filter.since !== undefined && event.created_at < filter.since) return false;
  if (filter.until !== undefined && event.created_at > filter.until) return false;
  for (const [key, values] of Object.entries(filter)) {
    if (key.length !== 2 || key[0] !== '#' || !Array.isArray(values)) continue;
    const name = key[1];
    if (!event.tags.some((t) => t[0] === name && values.includes(t[1]))) return false;
  }
  return true;
}

const dTag = (e) => e.tags.find((t) => t[0] === 'd')?.[1] ?? '';

class MemoryRepository extends EventRepository {
  events = new Map();
  isSearchSupported() { return false; }
  upsert(event) {
    if (this.events.has(event.id)) return { isDuplicate: true };
    const k = event.kind;
    const replaceable = k === 0 || k === 3 || (k >= 10000 && k < 20000);
    const addressable = k >= 30000 && k < 40000;
    if (replaceable || addressable) {
      for (const [id, old] of this.events) {
        if (old.kind !== k || old.pubkey !== event.pubkey) continue;
        if (addressable && dTag(old) !== dTag(event)) continue;
        if (old.created_at > event.created_at) return { isDuplicate: true };
        this.events.delete(id);
      }
    }
    this.events.set(event.id, event);
    return { isDuplicate: false };
  }
  find(filter) {
    const found = [...this.events.values()].filter((e) => matches(filter, e))
      .sort((a, b) => b.created_at - a.created_at);
    return filter.limit !== undefined ? found.slice(0, filter.limit) : found;
  }
  async deleteByDeletionRequest(deletion) {
    const ids = deletion.tags.filter((t) => t[0] === 'e').map((t) => t[1]);
    for (const id of ids) {
      if (this.events.get(id)?.pubkey === deletion.pubkey) this.events.delete(id);
    }
  }
  async destroy() {}
}

if (tagFiltersLive) {
  EventUtils.isMatchingFilter = (event, filter) => matches(filter, event);
}

const relay = new NostrRelay(new MemoryRepository());
const wss = new WebSocketServer({ host: '127.0.0.1', port: Number(process.env.RELAY_PORT ?? 0) });
wss.on('connection', (ws) => {
  relay.handleConnection(ws);
  ws.on('message', async (data) => {
    let msg;
    try { msg = JSON.parse(data.toString()); } catch { return; }
    if (!Array.isArray(msg)) return;
    try { await relay.handleMessage(ws, msg); } catch (err) { console.error('relay:', err); }
  });
  ws.on('close', () => relay.handleDisconnect(ws));
  ws.on('error', () => {});
});
wss.on('listening', () => {
  const { port } = wss.address();
  console.log(JSON.stringify({ ready: true, url: `ws://127.0.0.1:${port}`, tagFilters: tagFiltersLive ? 'live' : 'off' }));
});
const stop = () => { wss.close(); relay.destroy().finally(() => process.exit(0)); };
process.on('SIGINT', stop);
process.on('SIGTERM', stop);

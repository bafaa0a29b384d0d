// What decides whether the official TypeScript MCP client keeps the last
// progress notifications of a call, measured in the client's own process.
//
// The client (shared/protocol.js) hands a notification to its handler in a
// microtask but handles a response at once, removing the request's
// progress handler: a progress notification read in the same task as the
// response is dropped, and reported to onerror as "a progress notification
// for an unknown token". They are read in the same task when the client's
// event loop did not run between their arrivals: the server spaces them
// (cvm holds a response 20 ms after the latest progress, contextvm's
// progressSettle), so that takes a stall of the loop longer than that
// spacing, ending as the response is handled. The probe measures the
// loop's stalls with a 1 ms timer: each time it went more than stallMs
// without running it, up to the moment the response is handled, and how
// long before that moment each ended (a stall ends with the timers phase,
// which runs just before the read that delivers what queued meanwhile).
// The Go tests decide which stall explains a drop.
//
// Usage: create it before client.connect(transport); wrap each call that
// asks for progress in measure(); put the result in the script's output
// (the Go tests read it as progressProbe).
import { performance } from 'node:perf_hooks';

const stallMs = 5;

export class ProgressProbe {
  #ticks = [];
  #call = null;

  constructor(client, transport) {
    // Set before connect, this handler runs before the Protocol's, which
    // keeps and calls the one it finds.
    const next = transport.onmessage;
    transport.onmessage = (msg, extra) => {
      this.#seen(msg);
      next?.(msg, extra);
    };
    const onerror = client.onerror;
    client.onerror = (err) => {
      if (this.#call && String(err?.message ?? err).includes('progress notification for an unknown token')) {
        this.#call.dropped++;
      }
      onerror?.(err);
    };
  }

  // measure runs call (a function returning the call's promise) and
  // returns its result; last is then what was measured.
  async measure(call) {
    this.#ticks = [performance.now()];
    const timer = setInterval(() => this.#ticks.push(performance.now()), 1);
    this.#call = { delivered: 0, dropped: 0, lastProgressAt: null, stalls: null, gapMs: null };
    try {
      return await call();
    } finally {
      // A dropped notification is reported in a microtask after the
      // response; let every one of them run.
      await new Promise((resolve) => setImmediate(resolve));
      clearInterval(timer);
      const { delivered, dropped, stalls, gapMs } = this.#call;
      this.last = { delivered, dropped, stalls, gapMs };
      this.#call = null;
    }
  }

  #seen(msg) {
    const c = this.#call;
    if (!c) {
      return;
    }
    const now = performance.now();
    if (msg.method === 'notifications/progress') {
      c.delivered++;
      c.lastProgressAt = now;
    } else if (!('method' in msg) && 'id' in msg) {
      c.stalls = this.#stallsUntil(now);
      c.gapMs = c.lastProgressAt === null ? null : now - c.lastProgressAt;
    }
  }

  // stallsUntil lists the gaps between timer runs longer than stallMs, the
  // one still open at now included: their length and how long before now
  // they ended, in ms.
  #stallsUntil(now) {
    const t = [...this.#ticks, now];
    const stalls = [];
    for (let i = 1; i < t.length; i++) {
      if (t[i] - t[i - 1] > stallMs) {
        stalls.push({ ms: round(t[i] - t[i - 1]), endedBeforeMs: round(now - t[i]) });
      }
    }
    return stalls;
  }
}

const round = (ms) => Math.round(ms * 10) / 10;

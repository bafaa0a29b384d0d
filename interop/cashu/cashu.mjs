// One Cashu wallet operation with @cashu/cashu-ts, for the Go interop tests:
// the operation is the first argument, its input one JSON object on stdin,
// its result one JSON object on stdout ({"error": "..."} and exit 1 when it
// fails). Proofs go in and out as NUT-00 JSON with numeric amounts, so the
// Go side keeps the wallet's state between calls.
//
//   info         {mint}                        -> {info, keysets, keys}
//   mint-quote   {mint, amount}                -> the NUT-04 quote
//   mint-proofs  {mint, amount, quote}         -> {proofs, dleq}
//   send         {mint, amount, proofs}        -> {token, send, keep, spent}
//   receive      {mint, token}                 -> {proofs, dleq}
//   melt         {mint, invoice, proofs}       -> {quote, change, keep, spent}
//   states       {mint, proofs}                -> {states}
//   dleq         {mint, proofs}                -> {valid}
//   hash-to-curve {messages: [hex]}            -> {points: [hex]}
//   decode       {token, keyset_ids?}          -> {token}
//   encode       {token}                       -> {encoded}
//   creq-decode  {creq}                        -> {request}
//   creq-encode  {request}                     -> {encoded}
import {
  Amount,
  PaymentRequest,
  Wallet,
  decodePaymentRequest,
  getDecodedToken,
  getEncodedToken,
  hasValidDleq,
  hashToCurve,
} from '@cashu/cashu-ts';

// plain turns cashu-ts values into JSON the Go side reads as NUT-00:
// Amount becomes a number (its toJSON is a string), bytes become hex.
function plain(v) {
  if (v instanceof Amount) return v.toNumber();
  if (typeof v === 'bigint') return Number(v);
  if (v instanceof Uint8Array) return Buffer.from(v).toString('hex');
  if (Array.isArray(v)) return v.map(plain);
  if (v && typeof v === 'object') {
    const out = {};
    for (const [k, x] of Object.entries(v)) if (x !== undefined) out[k] = plain(x);
    return out;
  }
  return v;
}

// wallet is a cashu-ts wallet of the mint, loaded (info, keysets, keys),
// failing on a mint, swap or melt whose signatures lack the DLEQ proof the
// mint advertises (NUT-12).
async function wallet(mint) {
  const w = new Wallet(mint, { unit: 'sat', requireSigDleq: true });
  await w.loadMint();
  return w;
}

// dleqOf checks each proof's DLEQ proof (NUT-12, the carol side: with r)
// against the keys of the proof's keyset.
function dleqOf(w, proofs) {
  return proofs.map((p) => hasValidDleq(p, w.getKeyset(p.id)));
}

// afterSpending splits the proofs a wallet had before an operation into
// those the mint now reports spent and those still unspent, and adds the
// operation's new proofs to the latter: keep is what the wallet holds
// after it (cashu-ts's keep lists only a swap's change).
async function afterSpending(w, before, given, fresh) {
  const out = new Set(given.map((p) => p.secret));
  const states = await w.checkProofsStates(before);
  const spent = before.filter((_, i) => states[i].state === 'SPENT');
  const kept = before.filter((p, i) => states[i].state === 'UNSPENT' && !out.has(p.secret));
  const seen = new Set(kept.map((p) => p.secret));
  return { spent, keep: [...kept, ...fresh.filter((p) => !seen.has(p.secret) && !out.has(p.secret))] };
}

const ops = {
  async info({ mint }) {
    const w = await wallet(mint);
    const [keysets, keys] = await Promise.all([w.mint.getKeySets(), w.mint.getKeys()]);
    return { info: w.getMintInfo().cache, keysets: keysets.keysets, keys: keys.keysets };
  },
  async 'mint-quote'({ mint, amount }) {
    const w = await wallet(mint);
    return await w.createMintQuoteBolt11(amount);
  },
  async 'mint-proofs'({ mint, amount, quote }) {
    const w = await wallet(mint);
    const state = await w.checkMintQuoteBolt11(quote);
    const proofs = await w.mintProofsBolt11(amount, quote);
    return { quote_state: state.state, proofs, dleq: dleqOf(w, proofs) };
  },
  async send({ mint, amount, proofs }) {
    const w = await wallet(mint);
    const before = proofs.map((p) => ({ ...p, amount: Amount.from(p.amount) }));
    const { keep, send } = await w.send(amount, before, { includeFees: true });
    const token = getEncodedToken({ mint: w.mint.mintUrl, unit: 'sat', proofs: send });
    const after = await afterSpending(w, before, send, keep);
    return { token, send, ...after, dleq: dleqOf(w, [...keep, ...send]) };
  },
  async receive({ mint, token }) {
    const w = await wallet(mint);
    const proofs = await w.receive(token);
    return { proofs, dleq: dleqOf(w, proofs) };
  },
  async melt({ mint, invoice, proofs }) {
    const w = await wallet(mint);
    const before = proofs.map((p) => ({ ...p, amount: Amount.from(p.amount) }));
    const quote = await w.createMeltQuoteBolt11(invoice);
    const need = quote.amount.add(quote.fee_reserve);
    const { keep, send } = await w.send(need, before, { includeFees: true });
    const res = await w.meltProofsBolt11(quote, send);
    const after = await afterSpending(w, before, send, [...keep, ...res.change]);
    return { quote: res.quote, melted: send, change: res.change, ...after };
  },
  async states({ mint, proofs }) {
    const w = await wallet(mint);
    return { states: await w.checkProofsStates(proofs) };
  },
  async dleq({ mint, proofs }) {
    const w = await wallet(mint);
    return { valid: dleqOf(w, proofs.map((p) => ({ ...p, amount: Amount.from(p.amount) }))) };
  },
  async 'hash-to-curve'({ messages }) {
    return { points: messages.map((m) => hashToCurve(Buffer.from(m, 'hex')).toHex(true)) };
  },
  async decode({ token, keyset_ids }) {
    return { token: getDecodedToken(token, keyset_ids ?? []) };
  },
  async encode({ token }) {
    const proofs = token.proofs.map((p) => ({ ...p, amount: Amount.from(p.amount) }));
    return { encoded: getEncodedToken({ ...token, proofs }) };
  },
  async 'creq-decode'({ creq }) {
    return { request: decodePaymentRequest(creq).toRawRequest() };
  },
  async 'creq-encode'({ request }) {
    return { encoded: PaymentRequest.fromRawRequest(request).toEncodedCreqA() };
  },
};

async function readStdin() {
  const chunks = [];
  for await (const c of process.stdin) chunks.push(c);
  const text = Buffer.concat(chunks).toString('utf8').trim();
  return text === '' ? {} : JSON.parse(text);
}

const op = ops[process.argv[2]];
try {
  if (!op) throw new Error(`unknown operation ${JSON.stringify(process.argv[2])}; want one of ${Object.keys(ops).join(', ')}`);
  process.stdout.write(JSON.stringify(plain(await op(await readStdin()))) + '\n');
} catch (err) {
  process.stdout.write(JSON.stringify({ error: String(err?.message ?? err) }) + '\n');
  process.exitCode = 1;
}

// The bolt11 npm package (1.4.1) as the other side of cvm's BOLT 11 codec.
// Reads one JSON object on stdin:
//   {"decode": ["lnbc…", …],
//    "encode": [{"network": "bc"|"tb"|"bcrt", "msat": "…", "timestamp": s,
//                "paymentHash": hex, "paymentSecret": hex, "description": "…",
//                "descriptionHash": hex, (a paymentSecret sets feature bits 8 and 14) "expiry": s, "minFinalCltv": n,
//                "privateKey": hex}, …]}
// and prints one JSON object: what it decoded from each invoice (or why it
// refused it), and each invoice it encoded and signed.
import bolt11 from 'bolt11';

const networks = {
  bc: { bech32: 'bc', pubKeyHash: 0x00, scriptHash: 0x05, validWitnessVersions: [0, 1] },
  tb: { bech32: 'tb', pubKeyHash: 0x6f, scriptHash: 0xc4, validWitnessVersions: [0, 1] },
  bcrt: { bech32: 'bcrt', pubKeyHash: 0x6f, scriptHash: 0xc4, validWitnessVersions: [0, 1] },
};

let input = '';
for await (const chunk of process.stdin) input += chunk;
const { decode = [], encode = [] } = JSON.parse(input);

const tag = (d, name) => d.tags.find((t) => t.tagName === name)?.data;
const decoded = decode.map((pr) => {
  try {
    const d = bolt11.decode(pr);
    return {
      ok: true,
      network: d.network.bech32,
      msat: d.millisatoshis ?? null,
      timestamp: d.timestamp,
      payee: d.payeeNodeKey,
      signature: d.signature,
      paymentHash: tag(d, 'payment_hash'),
      paymentSecret: tag(d, 'payment_secret') ?? null,
      description: tag(d, 'description') ?? null,
      descriptionHash: tag(d, 'purpose_commit_hash') ?? null,
      expiry: tag(d, 'expire_time') ?? null,
      timeExpireDate: d.timeExpireDate,
      minFinalCltv: tag(d, 'min_final_cltv_expiry') ?? null,
      explicitPayee: tag(d, 'payee') ?? null,
    };
  } catch (e) {
    return { ok: false, error: String(e?.message ?? e) };
  }
});

const encoded = encode.map((s) => {
  try {
    const tags = [{ tagName: 'payment_hash', data: s.paymentHash }];
    if (s.paymentSecret) {
      // BOLT 11: an invoice with a payment secret sets feature bits 8 and 14.
      tags.push({ tagName: 'payment_secret', data: s.paymentSecret });
      tags.push({ tagName: 'feature_bits', data: { var_onion_optin: { required: true }, payment_secret: { required: true } } });
    }
    if (s.description !== undefined) tags.push({ tagName: 'description', data: s.description });
    if (s.descriptionHash) tags.push({ tagName: 'purpose_commit_hash', data: s.descriptionHash });
    if (s.expiry) tags.push({ tagName: 'expire_time', data: s.expiry });
    if (s.minFinalCltv) tags.push({ tagName: 'min_final_cltv_expiry', data: s.minFinalCltv });
    const unsigned = bolt11.encode({
      network: networks[s.network], timestamp: s.timestamp, tags,
      ...(s.msat ? { millisatoshis: s.msat } : {}),
    }, false);
    return { ok: true, invoice: bolt11.sign(unsigned, s.privateKey).paymentRequest };
  } catch (e) {
    return { ok: false, error: String(e?.message ?? e) };
  }
});

console.log(JSON.stringify({ decoded, encoded }));

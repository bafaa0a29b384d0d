// DIDAuthV1 with the real @nuwa-ai/identity-kit 0.6.0, driven by
// interop/identitykit_test.go. Two modes, chosen by MODE:
//   send:   for each key type, make a did:key with the kit, sign a request
//           as the kit's HTTP clients do ({operation:"http_request",
//           params:{method,uri}}), and POST it to SERVER_URL; also once with
//           params changed after signing (the kit's known weakness). Prints
//           {"results":[{type,did,tampered,status,body}]}.
//   verify: read {"headers":[…],"docs":{did:doc}} from INPUT and verify each
//           header with the kit's verifyAuthHeader, resolving DIDs from docs
//           (the kit does not resolve arbitrary did:keys by itself). Prints
//           {"results":[{ok,errorCode}]}.
import { CryptoUtils, DIDAuth, DidKeyCodec, KeyType } from '@nuwa-ai/identity-kit';

// The kit logs to stdout while verifying; keep stdout for the one result.
console.log = (...a) => console.error(...a);
const out = (v) => process.stdout.write(JSON.stringify(v) + '\n');

async function send() {
  const url = process.env.SERVER_URL;
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo', arguments: { text: 'hi' } } });
  const results = [];
  for (const type of [KeyType.ED25519, KeyType.SECP256K1, KeyType.ECDSAR1]) {
    const { publicKey, privateKey } = await CryptoUtils.generateKeyPair(type);
    const did = DidKeyCodec.generateDidKey(publicKey, type);
    const keyId = `${did}#account-key`;
    const signer = {
      getDid: async () => did,
      listKeyIds: async () => [keyId],
      canSignWithKeyId: async (id) => id === keyId,
      getKeyInfo: async (id) => (id === keyId ? { type, publicKey } : undefined),
      signWithKeyId: async (data) => CryptoUtils.sign(data, privateKey, type),
    };
    for (const tampered of [false, true]) {
      const signed = await DIDAuth.v1.createSignature({ operation: 'http_request', params: { uri: url, method: 'POST' } }, signer, keyId);
      if (tampered) signed.signed_data.params = { uri: 'https://evil.example/transfer_all_funds', method: 'POST' };
      const header = DIDAuth.v1.toAuthorizationHeader(signed);
      const resp = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', authorization: header }, body });
      results.push({ type, did, tampered, status: resp.status, body: await resp.text() });
    }
  }
  out({ results });
}

async function verify() {
  const input = JSON.parse(process.env.INPUT);
  const resolver = { resolveDID: async (did) => input.docs[did] ?? null };
  const results = [];
  for (const h of input.headers) {
    const r = await DIDAuth.v1.verifyAuthHeader(h, resolver);
    results.push({ ok: r.ok, errorCode: r.errorCode ?? null, error: r.error ?? null });
  }
  out({ results });
}

const mode = process.env.MODE;
try {
  if (mode === 'send') await send();
  else if (mode === 'verify') await verify();
  else throw new Error(`MODE must be send or verify, not ${mode}`);
} catch (e) {
  out({ error: String(e && e.stack || e) });
  process.exitCode = 1;
}

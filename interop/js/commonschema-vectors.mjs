// Runs the reference SDK's CEP-15 code over cvm's test vectors and prints one
// JSON object with what it computed. The Go test decides.
//
// env: VECTORS   path of commonschema/testdata/vectors.json
//      ANNOUNCE  path of a JSON file {tools, common, categories}: a tools/list
//                result, the names of the tools declared common, and the
//                announcement categories
//
// Output: {
//   vectors: [{id, hash, canonical} | {id, error}],   one per vector, in order
//   annotated: the tools/list result after the reference's transformer,
//   tags: the 11317 tags the reference's producer returns,
// }
import { readFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import {
  computeCommonSchemaHash,
  normalizeSchema,
  createCommonSchemaToolsResultTransformer,
  createCommonSchemaAnnouncementTagsProducer,
} from '@contextvm/sdk';

const out = { vectors: [] };

// canonical shows the bytes behind a hash, which is what makes a mismatch
// debuggable. It is rebuilt here from the SDK's exported normalizeSchema and
// checked against computeCommonSchemaHash, so it cannot drift from what the
// SDK actually hashes without the Go test noticing (canonicalHashes=false).
function canonicalOf(tool) {
  const payload = { name: tool.name, inputSchema: normalizeSchema(tool.inputSchema) };
  if (tool.outputSchema != null) payload.outputSchema = normalizeSchema(tool.outputSchema);
  return canonicalize(payload);
}

try {
  const { vectors } = JSON.parse(readFileSync(process.env.VECTORS, 'utf8'));
  out.canonicalHashes = true;
  for (const v of vectors) {
    try {
      const hash = computeCommonSchemaHash(v.tool);
      const canonical = canonicalOf(v.tool);
      if (createHash('sha256').update(canonical, 'utf8').digest('hex') !== hash) {
        out.canonicalHashes = false;
      }
      out.vectors.push({ id: v.id, hash, canonical });
    } catch (e) {
      out.vectors.push({ id: v.id, error: String(e.message) });
    }
  }

  const { tools, common, categories } = JSON.parse(readFileSync(process.env.ANNOUNCE, 'utf8'));
  const options = { tools: common.map((name) => ({ name })), categories };
  out.annotated = createCommonSchemaToolsResultTransformer(options)({ tools });
  out.tags = createCommonSchemaAnnouncementTagsProducer(options)({ tools });
} catch (e) {
  out.error = String(e && e.stack || e);
}
console.log(JSON.stringify(out));

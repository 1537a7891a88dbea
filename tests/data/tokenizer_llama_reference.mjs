// Why: the Llama tokenizers must produce exactly the ids of the reference
// encoders that ship the vocabularies (llama3-tokenizer-js 1.2.0 and
// llama-tokenizer-js 1.2.2). tokenizer_llama_test.cc runs this script to get
// those packages' own ids for its corpus and compares them with ours.
//
// Usage: node tokenizer_llama_reference.mjs NPM_PREFIX llama3|llama2 < docs.jsonl > ids.txt
//   docs.jsonl: one JSON string (a document) per line.
//   ids.txt:    one line per document: its ids, space-separated, no BOS/EOS
//               (llama3: encode(text, {bos: false, eos: false});
//                llama2: encode(text, false, true): no BOS, with the dummy prefix).
// With --time, also prints "seconds <s> bytes <n>" (encoding time only) to stderr.

import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [prefix, which, flag] = process.argv.slice(2);
const entries = {
  llama3: ['llama3-tokenizer-js', 'bundle/llama3-tokenizer-with-baked-data.js'],
  llama2: ['llama-tokenizer-js', 'llama-tokenizer.js'],
};
if (!prefix || !entries[which]) {
  console.error('usage: node tokenizer_llama_reference.mjs NPM_PREFIX llama3|llama2 [--time] < docs.jsonl');
  process.exit(2);
}
const [pkg, entry] = entries[which];
const mod = await import(pathToFileURL(path.resolve(prefix, 'node_modules', pkg, entry)).href);
const tok = mod.default;
const encode = which === 'llama3' ? (s) => tok.encode(s, { bos: false, eos: false }) : (s) => tok.encode(s, false, true);

const docs = fs.readFileSync(0, 'utf8').split('\n').filter((l) => l.length > 0).map((l) => JSON.parse(l));
const out = [];
let bytes = 0;
const t0 = process.hrtime.bigint();
for (const d of docs) {
  out.push(encode(d).join(' '));
  bytes += Buffer.byteLength(d, 'utf8');
}
const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
fs.writeFileSync(1, out.join('\n') + '\n');
if (flag === '--time') console.error(`seconds ${seconds} bytes ${bytes}`);

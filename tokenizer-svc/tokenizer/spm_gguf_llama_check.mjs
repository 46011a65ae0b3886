// llama.cpp's own tokenizer (the peer's node-llama-cpp, vocab only) on a SentencePiece
// GGUF written by `gantry bundle make-test-model`: prints one line per corpus case and variant,
// "ok <case> <variant>" or "bad <case> <variant> <first differing index>", comparing with
// the expected Hugging Face ids (parse_special=true vs "ids", false vs "ids_split_special").
//   node spm_gguf_llama_check.mjs PEER_DIR MODEL.gguf EXPECTED_DIR CORPUS_DIR
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [peer, model, expectedDir, corpusDir] = process.argv.slice(2);
const entry = path.join(peer, "node_modules", "node-llama-cpp", "dist", "index.js");
const { getLlama, LlamaLogLevel } = await import(pathToFileURL(entry).href);
const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
const vocab = await llama.loadModel({ modelPath: model, gpuLayers: 0, vocabOnly: true });
const firstDiff = (a, b) => {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return a.length === b.length ? -1 : n;
};
for (const f of fs.readdirSync(corpusDir).filter((x) => x.endsWith(".txt")).sort()) {
  const name = f.replace(/\.txt$/, "");
  const expected = JSON.parse(fs.readFileSync(path.join(expectedDir, `${name}.json`), "utf8"));
  const text = fs.readFileSync(path.join(corpusDir, f)).toString("utf8");
  for (const [variant, special] of [["ids", true], ["ids_split_special", false]]) {
    const d = firstDiff(Array.from(vocab.tokenize(text, special)), expected[variant]);
    console.log(d < 0 ? `ok ${name} ${variant}` : `bad ${name} ${variant} ${d}`);
  }
}
await vocab.dispose();
await llama.dispose();

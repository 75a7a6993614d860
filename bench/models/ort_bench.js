// ONNX Runtime (npm onnxruntime-node, CPU execution provider) side of bench/models/run.py.
// usage: node ort_bench.js MODEL.onnx SPEC.json   (SPEC: {threads, runs, seconds, inputs:[{name, file, shape, dtype}], out_dir})
// Prints one JSON line: {median_ms, ci_ms:[lo,hi], runs, outputs:[{name, file, shape}]}.
"use strict";
const fs = require("fs");
const path = require("path");
const ort = require("onnxruntime-node");

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor((s.length - 1) / 2)];
}

async function main() {
  const [modelPath, specPath] = process.argv.slice(2);
  const spec = JSON.parse(fs.readFileSync(specPath, "utf8"));
  const session = await ort.InferenceSession.create(modelPath, {
    executionProviders: ["cpu"],
    intraOpNumThreads: spec.threads,
    interOpNumThreads: 1,
    graphOptimizationLevel: "all",
  });
  const feeds = {};
  for (const inp of spec.inputs) {
    const buf = fs.readFileSync(inp.file);
    const data = new Float32Array(buf.buffer, buf.byteOffset, buf.byteLength / 4);
    feeds[inp.name] = new ort.Tensor("float32", data, inp.shape);
  }
  let out = await session.run(feeds);
  for (let i = 0; i < 3; ++i) out = await session.run(feeds);  // warm-up
  const times = [];
  const budgetEnd = process.hrtime.bigint() + BigInt(Math.round(spec.seconds * 1e9));
  while (times.length < spec.runs && (times.length < 5 || process.hrtime.bigint() < budgetEnd)) {
    const t0 = process.hrtime.bigint();
    out = await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  const outputs = [];
  for (const name of session.outputNames) {
    const t = out[name];
    const file = path.join(spec.out_dir, `ort_${name}.bin`);
    fs.writeFileSync(file, Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
    outputs.push({ name, file, shape: t.dims });
  }
  console.log(JSON.stringify({ median_ms: median(times), times_ms: times, runs: times.length, outputs }));
}

main().catch((e) => {
  console.error(String(e && e.stack ? e.stack : e));
  process.exit(1);
});

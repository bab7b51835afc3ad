// scripts/ort-fp8-vectors.js — a desk program, not part of the build: ONNX
// Runtime's CPU Cast (float -> FLOAT8E4M3FN / FLOAT8E5M2, saturate = 1, the
// default; then back to float) on the inputs tests/fp8/draw.h draws, as
// per-chunk digests, into tests/fp8/ort_vectors.txt, which tests/test_fp8.cpp
// checks conform/dtype.h's conversions against, bit for bit.
//
// ONNX Runtime comes from npm, unbuilt and outside the repo:
//   mkdir /tmp/ort && cd /tmp/ort && npm install onnxruntime-node --ignore-scripts
//   NODE_PATH=/tmp/ort/node_modules node scripts/ort-fp8-vectors.js > tests/fp8/ort_vectors.txt
//
// The model is two Casts per format, as protobuf (scripts/onnx-proto.js: no onnx package needed).
const ort = require('onnxruntime-node');

const { bytesField, str, attrInt, vinfo, nodeProto, modelProto, FLOAT, FLOAT8E4M3FN, FLOAT8E5M2 } = require('./onnx-proto');
const cast = (from, to, type) => bytesField(1, nodeProto([from], [to], 'Cast', [attrInt('to', type)]));
const graph = [
  ...cast('x', 'a', FLOAT8E4M3FN), ...cast('a', 'e4m3', FLOAT), ...cast('x', 'b', FLOAT8E5M2), ...cast('b', 'e5m2', FLOAT),
  ...str(2, 'fp8'), ...bytesField(11, vinfo('x', FLOAT, 1)), ...bytesField(12, vinfo('e4m3', FLOAT, 1)),
  ...bytesField(12, vinfo('e5m2', FLOAT, 1))];
const model = modelProto(graph, 19);

// The inputs, as tests/fp8/draw.h draws them (integers only, so both sides agree bit for bit).
function draw() {
  const bits = [];
  const f = new Float32Array(1), u = new Uint32Array(f.buffer);
  const around = v => { f[0] = v; const b = u[0]; for (const d of [-1, 0, 1]) { bits.push((b + d) >>> 0, ((b + d) | 0x80000000) >>> 0); } };
  // Every value of each format (M mantissa bits, exponent bias, largest exponent) and every midpoint, ±1 ulp.
  for (const [M, bias, emax] of [[3, 7, 8], [2, 15, 15]])
    for (let e = 1 - bias - M; e <= emax + 2; ++e)
      for (let m = 0; m < 2 << M; ++m) { around(m * 2 ** e); around((m + 0.5) * 2 ** e); }
  // Random floats: any sign and mantissa, exponents 2^-20 .. 2^18 (xorshift64).
  let r = 0x9E3779B97F4A7C15n;
  const M64 = 0xFFFFFFFFFFFFFFFFn;
  for (let i = 0; i < kRandom; ++i) {
    r ^= (r << 13n) & M64; r ^= r >> 7n; r ^= (r << 17n) & M64;
    const e = 107 + Number(r % 39n), mant = Number((r >> 8n) & 0x7FFFFFn), s = Number((r >> 40n) & 1n);
    bits.push(((s << 31) | (e << 23) | mant) >>> 0);
  }
  return Uint32Array.from(bits);
}
const kRandom = 1 << 20, kChunk = 1 << 16;

// FNV-1a 64 over each chunk's output bits, little-endian bytes.
function digests(out) {
  const u = new Uint32Array(out.buffer, out.byteOffset, out.length), d = [];
  for (let c = 0; c < u.length; c += kChunk) {
    let h = 0xcbf29ce484222325n;
    for (let i = c; i < Math.min(u.length, c + kChunk); ++i)
      for (let k = 0; k < 4; ++k) { h ^= BigInt((u[i] >>> (8 * k)) & 0xff); h = (h * 0x100000001b3n) & 0xFFFFFFFFFFFFFFFFn; }
    d.push(h.toString(16).padStart(16, '0'));
  }
  return d;
}

(async () => {
  const s = await ort.InferenceSession.create(model);
  const bits = draw(), x = new Float32Array(bits.buffer);
  const out = await s.run({ x: new ort.Tensor('float32', x, [x.length]) });
  console.log('# ONNX Runtime ' + require('onnxruntime-node/package.json').version +
              ' (npm onnxruntime-node, CPU), Cast float -> float8 (saturate=1) -> float; ' + x.length +
              ' inputs (tests/fp8/draw.h), FNV-1a 64 of the output bits per chunk of ' + kChunk);
  for (const [name, t] of [['fp8_e4m3', out.e4m3], ['fp8_e5m2', out.e5m2]])
    console.log(name + ' ' + x.length + ' ' + kChunk + ' ' + digests(t.data).join(' '));
})().catch(e => { console.error(e); process.exit(1); });

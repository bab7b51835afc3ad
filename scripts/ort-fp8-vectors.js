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
// The model is two Casts per format, written here as protobuf by hand (no onnx package needed).
const ort = require('onnxruntime-node');

function varint(n) { const b = []; n = BigInt(n); do { let x = Number(n & 0x7fn); n >>= 7n; if (n) x |= 0x80; b.push(x); } while (n); return b; }
const key = (f, t) => varint((f << 3) | t);
const str = (f, s) => [...key(f, 2), ...varint(Buffer.byteLength(s)), ...Buffer.from(s)];
const msg = (f, bytes) => [...key(f, 2), ...varint(bytes.length), ...bytes];
const int = (f, v) => [...key(f, 0), ...varint(v)];
const attrInt = (name, v) => [...str(1, name), ...int(3, v), ...int(20, 2)];  // AttributeProto, type INT
const node = (ins, outs, op, attrs) =>
  [...ins.flatMap(i => str(1, i)), ...outs.flatMap(o => str(2, o)), ...str(4, op), ...attrs.flatMap(a => msg(5, a))];
const vinfo = (name, elem) => [...str(1, name), ...msg(2, msg(1, [...int(1, elem), ...msg(2, msg(1, str(2, 'n')))]))];
const FLOAT = 1, E4M3FN = 17, E5M2 = 19;
const graph = [
  ...msg(1, node(['x'], ['a'], 'Cast', [attrInt('to', E4M3FN)])), ...msg(1, node(['a'], ['e4m3'], 'Cast', [attrInt('to', FLOAT)])),
  ...msg(1, node(['x'], ['b'], 'Cast', [attrInt('to', E5M2)])), ...msg(1, node(['b'], ['e5m2'], 'Cast', [attrInt('to', FLOAT)])),
  ...str(2, 'fp8'), ...msg(11, vinfo('x', FLOAT)), ...msg(12, vinfo('e4m3', FLOAT)), ...msg(12, vinfo('e5m2', FLOAT))];
const model = Uint8Array.from([...int(1, 9), ...msg(8, [...str(1, ''), ...int(2, 19)]), ...msg(7, graph)]);

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

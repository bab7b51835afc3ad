// scripts/ort-checkpoint-logits.js — a desk program, not part of the build:
// one of the tests' HF checkpoints (tests/weights/make_checkpoints.cpp) run
// as an ONNX graph on ONNX Runtime's CPU kernels, its logits written as an
// HDF5 file that `conform forward --expect-logits` reads.
//
// It is the producer that applies a sliding window conform did not write:
// llama.cpp converts Mistral as `llama`, whose graph has none. The attention
// is ONNX Runtime's GroupQueryAttention (com.microsoft: GQA, RoPE by its
// cos/sin caches, `local_window_size`); norms, projections and the SwiGLU
// are plain ONNX ops. Conventions it knows: Llama, Mistral (`sliding_window`
// on every layer), Qwen2 (q/k/v biases). Anything else is refused by name.
//
// ONNX Runtime comes from npm, unbuilt and outside the repo:
//   mkdir /tmp/ort && cd /tmp/ort && npm install onnxruntime-node --ignore-scripts
//   build/tests/weights_checkpoints /tmp/ck
//   NODE_PATH=/tmp/ort/node_modules node scripts/ort-checkpoint-logits.js \
//       /tmp/ck/mistral-hf 1,5,2,7,3 tests/weights/ort-mistral.h5 [--window-keys N]
//
// HF's `sliding_window` W lets a query see W keys, itself included. ONNX
// Runtime 1.31.1's `local_window_size` L, measured with a one-head probe
// (q = 0, v one-hot by position): a row sees L keys, itself included, so W is
// passed as it is. (ORT's older CPU kernel, onnxruntime's
// gqa_attention_base.h at commit 255fa1c6, kept L + 1: the attribute has meant both.)
// `--window-keys N` runs N keys instead: N = W + 1 or W - 1 is the engine
// one key off, which conform names window_off_by_one.
//
// The model is protobuf written by hand (scripts/onnx-proto.js: no onnx package needed).
const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');
const ort = require('onnxruntime-node');

const { bytesField, str, int, attrInt, attrFloat, vinfo, nodeProto, modelProto, FLOAT, INT32, INT64 } = require('./onnx-proto');

const nodes = [], inits = [];
let nameCount = 0;
const fresh = stem => `${stem}_${nameCount++}`;
// NodeProto: input 1, output 2, op_type 4, attribute 5, domain 7
function node(op, ins, nOut = 1, attrs = [], domain = '') {
  const outs = Array.from({ length: nOut }, () => fresh(op));
  nodes.push(bytesField(1, nodeProto(ins, outs, op, attrs, domain)));
  return nOut === 1 ? outs[0] : outs;
}
// TensorProto: dims 1, data_type 2, name 8, raw_data 9
function init(stem, type, dims, raw) {
  const name = fresh(stem);
  inits.push(bytesField(5, [...dims.flatMap(d => int(1, d)), ...int(2, type), ...str(8, name), ...bytesField(9, [...raw])]));
  return name;
}
const initF = (stem, dims, arr) => init(stem, FLOAT, dims, Buffer.from(Float32Array.from(arr).buffer));
const initI64 = (stem, dims, arr) => init(stem, INT64, dims, Buffer.from(BigInt64Array.from(arr.map(BigInt)).buffer));
const initI32 = (stem, dims, arr) => init(stem, INT32, dims, Buffer.from(Int32Array.from(arr).buffer));

// ---- the checkpoint: config.json + one F32 model.safetensors ----
function readCheckpoint(dir) {
  const cfg = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8'));
  const file = path.join(dir, 'model.safetensors');
  const buf = fs.readFileSync(file);
  const n = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + n).toString('utf8'));
  const tensors = {};
  for (const [name, t] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    if (t.dtype !== 'F32') throw new Error(`${file}: ${name}: dtype ${t.dtype}, this program reads F32 only`);
    const [a, b] = t.data_offsets;
    const bytes = buf.subarray(8 + n + a, 8 + n + b);
    tensors[name] = { shape: t.shape, data: new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length)) };
  }
  return { cfg, tensors, file };
}

// HF stores a projection [out, in]; ONNX's MatMul wants x @ W with W [in, out].
function transposed({ shape: [rows, cols], data }) {
  const t = new Float32Array(rows * cols);
  for (let r = 0; r < rows; ++r) for (let c = 0; c < cols; ++c) t[c * rows + r] = data[r * cols + c];
  return { dims: [cols, rows], data: t };
}

function build(ck, windowKeys) {
  const { cfg, tensors, file } = ck;
  const known = { llama: 'LlamaForCausalLM', mistral: 'MistralForCausalLM', qwen2: 'Qwen2ForCausalLM' };
  if (!known[cfg.model_type]) throw new Error(`${file}: model_type '${cfg.model_type}': this program runs ${Object.keys(known).join(', ')}`);
  for (const field of ['rope_scaling', 'layer_types', 'attention_bias', 'mlp_bias'])
    if (cfg[field]) throw new Error(`${file}: config field '${field}' is not modelled here`);
  if ((cfg.hidden_act || 'silu') !== 'silu') throw new Error(`${file}: hidden_act '${cfg.hidden_act}' is not modelled here`);
  const W = name => { const t = tensors[name]; if (!t) throw new Error(`${file}: no tensor '${name}'`); return t; };
  const D = cfg.hidden_size, H = cfg.num_attention_heads, KV = cfg.num_key_value_heads || H;
  const hd = cfg.head_dim || D / H, eps = cfg.rms_norm_eps, theta = cfg.rope_theta || 10000;
  const window = cfg.model_type === 'qwen2' ? 0 : (cfg.sliding_window || 0);
  if (cfg.model_type === 'qwen2' && cfg.use_sliding_window) throw new Error(`${file}: use_sliding_window is not modelled here`);

  const matmul = (x, name) => { const t = transposed(W(name)); return node('MatMul', [x, initF('w', t.dims, t.data)]); };
  const linear = (x, stem) => tensors[stem + '.bias'] ? node('Add', [matmul(x, stem + '.weight'), initF('b', [W(stem + '.bias').shape[0]], W(stem + '.bias').data)]) : matmul(x, stem + '.weight');
  const two = initF('two', [], [2]), epsT = initF('eps', [], [eps]), lastAxis = initI64('axes', [1], [-1]);
  // RMSNorm by its formula: x / sqrt(mean(x^2) + eps) * w
  const rmsnorm = (x, name) => {
    const ms = node('ReduceMean', [node('Pow', [x, two]), lastAxis], 1, [attrInt('keepdims', 1)]);
    return node('Mul', [node('Div', [x, node('Sqrt', [node('Add', [ms, epsT])])]), initF('g', [D], W(name).data)]);
  };
  // RoPE caches [max_pos, hd/2] in float64 then rounded, HF's inv_freq = theta^(-2i/hd)
  const maxPos = 64, cos = [], sin = [];
  for (let p = 0; p < maxPos; ++p)
    for (let i = 0; i < hd / 2; ++i) { const a = p * Math.pow(theta, -2 * i / hd); cos.push(Math.cos(a)); sin.push(Math.sin(a)); }
  const cosT = initF('cos', [maxPos, hd / 2], cos), sinT = initF('sin', [maxPos, hd / 2], sin);

  const embed = W('model.embed_tokens.weight');
  let x = node('Gather', [initF('embed', embed.shape, embed.data), 'input_ids']);
  const localWindow = window > 0 ? (windowKeys || window) : -1;
  for (let l = 0; l < cfg.num_hidden_layers; ++l) {
    const p = `model.layers.${l}.`;
    const h = rmsnorm(x, p + 'input_layernorm.weight');
    const q = linear(h, p + 'self_attn.q_proj'), k = linear(h, p + 'self_attn.k_proj'), v = linear(h, p + 'self_attn.v_proj');
    // inputs: query key value past_key past_value seqlens_k total_sequence_length cos_cache sin_cache
    const [attn] = node('GroupQueryAttention', [q, k, v, '', '', 'seqlens_k', 'total_len', cosT, sinT], 3,
                        [attrInt('num_heads', H), attrInt('kv_num_heads', KV), attrInt('do_rotary', 1),
                         attrInt('rotary_interleaved', 0), attrInt('local_window_size', localWindow),
                         attrFloat('scale', 1 / Math.sqrt(hd))], 'com.microsoft');
    x = node('Add', [x, matmul(attn, p + 'self_attn.o_proj.weight')]);
    const h2 = rmsnorm(x, p + 'post_attention_layernorm.weight');
    const g = matmul(h2, p + 'mlp.gate_proj.weight'), u = matmul(h2, p + 'mlp.up_proj.weight');
    const act = node('Mul', [node('Mul', [g, node('Sigmoid', [g])]), u]);
    x = node('Add', [x, matmul(act, p + 'mlp.down_proj.weight')]);
  }
  const head = cfg.tie_word_embeddings ? 'model.embed_tokens.weight' : 'lm_head.weight';
  const logits = matmul(rmsnorm(x, 'model.norm.weight'), head);
  const out = node('Identity', [logits]);
  const graph = [...nodes.flat(), ...str(2, 'checkpoint'), ...inits.flat(),
                 ...bytesField(11, vinfo('input_ids', INT64, 2)), ...bytesField(11, vinfo('seqlens_k', INT32, 1)),
                 ...bytesField(11, vinfo('total_len', INT32, 0)), ...bytesField(12, vinfo(out, FLOAT, 3))];
  const model = modelProto(graph, 21, true);
  return { model, out, localWindow, window, vocab: cfg.vocab_size, type: cfg.model_type };
}

(async () => {
  const args = process.argv.slice(2);
  let windowKeys = 0;
  const wk = args.indexOf('--window-keys');
  if (wk >= 0) { windowKeys = Number(args[wk + 1]); args.splice(wk, 2); if (!(windowKeys >= 1)) throw new Error('--window-keys: expected a count >= 1'); }
  if (args.length !== 3) throw new Error('usage: ort-checkpoint-logits.js CHECKPOINT_DIR TOKENS OUT.h5 [--window-keys N]');
  const [dir, tokenList, outFile] = args;
  const tokens = tokenList.split(',').map(Number);
  const b = build(readCheckpoint(dir), windowKeys);
  const s = await ort.InferenceSession.create(b.model, { intraOpNumThreads: 1 });
  const S = tokens.length;
  const r = await s.run({
    input_ids: new ort.Tensor('int64', BigInt64Array.from(tokens.map(BigInt)), [1, S]),
    seqlens_k: new ort.Tensor('int32', Int32Array.from([S - 1]), [1]),
    total_len: new ort.Tensor('int32', Int32Array.from([S]), []),
  });
  const logits = Array.from(r[b.out].data);
  const version = require('onnxruntime-node/package.json').version;
  const producer = `ONNX Runtime ${version} (npm onnxruntime-node, CPU, 1 thread): scripts/ort-checkpoint-logits.js, ` +
                   `GroupQueryAttention local_window_size ${b.localWindow}` +
                   (b.window ? ` (sliding_window ${b.window}${windowKeys ? `, run as ${windowKeys} keys` : ''})` : '');
  // HDF5 as the tests' other producers' logits: logits [S, V] f32, token_ids, positions; attrs model, producer.
  const py = `
import h5py, json, sys, numpy as np
d = json.load(sys.stdin)
with h5py.File(sys.argv[1], 'w') as f:
    f['logits'] = np.asarray(d['logits'], dtype=np.float32).reshape(len(d['tokens']), -1)
    f['token_ids'] = np.asarray(d['tokens'], dtype=np.int64)
    f['positions'] = np.arange(len(d['tokens']), dtype=np.int64)
    f.attrs['model'] = d['model']
    f.attrs['producer'] = d['producer']
`;
  const py3 = spawnSync('/usr/bin/python3', ['-c', py, outFile],
                        { input: JSON.stringify({ logits, tokens, model: b.type, producer }), stdio: ['pipe', 'inherit', 'inherit'] });
  if (py3.status !== 0) throw new Error(`writing ${outFile} failed`);
  console.log(`${outFile}: ${S} x ${b.vocab} logits, ${producer}`);
})().catch(e => { console.error(e.message || e); process.exit(2); });

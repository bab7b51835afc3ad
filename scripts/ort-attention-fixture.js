// scripts/ort-attention-fixture.js — a desk program, not part of the build:
// attention with gpt-oss's sinks, sliding windows and Gemma 2's soft-cap,
// computed by ONNX Runtime's CPU GroupQueryAttention (com.microsoft; inputs
// `head_sink`, attributes `local_window_size`, `softcap`), written as a
// conform fixture of op `attention` whose expected outputs are ORT's.
// `conform --fixtures` then judges conform's reference and every
// implementation against code nobody here wrote.
//
//   mkdir /tmp/ort && cd /tmp/ort && npm install onnxruntime-node --ignore-scripts
//   NODE_PATH=/tmp/ort/node_modules node scripts/ort-attention-fixture.js fixtures/attention-ort-sinks-windows.h5
//
// ORT computes in float32, so its outputs use up part of each case's bound
// (fixtures/SCHEMA.md). Conventions, as measured on 1.31.1: `local_window_size`
// W lets a query see W keys, itself included (HF's `sliding_window`); a
// `head_sink` logit joins each row's softmax denominator and is not
// soft-capped. Queries are the last T of S keys at positions 0 … S − 1 (with
// past keys through `past_key` / `past_value` when T < S).
const ort = require('onnxruntime-node');

const { bytesField, str, attrInt, attrFloat, vinfo, nodeProto, modelProto, FLOAT, INT32 } = require('./onnx-proto');
const { draws, writeFixture } = require('./fixture-writer');

// One GroupQueryAttention node: q k v past_key past_value seqlens_k total_sequence_length
// cos_cache sin_cache position_ids attention_bias head_sink (inputs 0 … 11).
function gqaModel(c) {
  const ins = ['q', 'k', 'v', c.past ? 'past_key' : '', c.past ? 'past_value' : '', 'seqlens_k', 'total_len',
               '', '', '', '', c.sinks ? 'sink' : ''];
  while (ins[ins.length - 1] === '') ins.pop();
  const attrs = [attrInt('num_heads', c.H), attrInt('kv_num_heads', c.KV), attrFloat('scale', 1 / Math.sqrt(c.hd)),
                 attrInt('local_window_size', c.window || -1), ...(c.softcap ? [attrFloat('softcap', c.softcap)] : [])];
  const node = bytesField(1, nodeProto(ins, ['out', 'present_key', 'present_value'], 'GroupQueryAttention', attrs,
                                      'com.microsoft'));
  const inputs = [vinfo('q', FLOAT, 3), vinfo('k', FLOAT, 3), vinfo('v', FLOAT, 3), vinfo('seqlens_k', INT32, 1),
                  vinfo('total_len', INT32, 0), ...(c.past ? [vinfo('past_key', FLOAT, 4), vinfo('past_value', FLOAT, 4)] : []),
                  ...(c.sinks ? [vinfo('sink', FLOAT, 1)] : [])];
  const graph = [...node, ...str(2, 'gqa'), ...inputs.flatMap(i => bytesField(11, i)), ...bytesField(12, vinfo('out', FLOAT, 3))];
  return modelProto(graph, 21, true);
}

// ---- inputs: xorshift64 + Box-Muller, rounded to float32 ----
const { draw } = draws(0x2545F4914F6CDD1Dn);

// The cases: where each twist matters (fixtures/SCHEMA.md's `sliding_window`, `attn_sinks`, `attn_logit_softcapping`).
const cases = [
  { name: 'sinks_window8_gqa', what: 'gpt-oss: sinks N(0, 2) per head, window 8 of 24 keys, GQA 2',
    H: 4, KV: 2, hd: 64, S: 24, T: 24, window: 8, sinks: { scale: 2 } },
  { name: 'sinks_dominant_full', what: 'sinks 6 .. 10, above every score: most of each row\'s mass on the sink',
    H: 4, KV: 2, hd: 64, S: 17, T: 17, sinks: { scale: 1, mean: 8 } },
  { name: 'sinks_negligible_window1', what: 'sinks -30 and window 1: each query sees its own key alone',
    H: 4, KV: 2, hd: 64, S: 9, T: 9, window: 1, sinks: { scale: 1, mean: -30 } },
  { name: 'window_equals_context', what: 'window 16 of 16 keys: no key outside it',
    H: 4, KV: 4, hd: 32, S: 16, T: 16, window: 16, sinks: { scale: 1 } },
  { name: 'window_one_short', what: 'window 15 of 16 keys: the last query loses key 0',
    H: 4, KV: 4, hd: 32, S: 16, T: 16, window: 15, sinks: { scale: 1 } },
  { name: 'decode_chunk_mqa', what: '3 queries after 29 past keys (ORT past_key / past_value), window 8, sinks, MQA',
    H: 8, KV: 1, hd: 64, S: 32, T: 3, window: 8, sinks: { scale: 2 } },
  { name: 'softcap_window', what: 'Gemma 2: soft-cap 5 on scores of std 4, window 4, no sinks',
    H: 4, KV: 2, hd: 64, S: 12, T: 12, window: 4, softcap: 5, qScale: 4 },
  { name: 'softcap_sinks', what: 'soft-cap 5 and sinks 4 .. 8: the sink is not capped',
    H: 4, KV: 2, hd: 64, S: 12, T: 12, window: 6, softcap: 5, qScale: 4, sinks: { scale: 1, mean: 6 } },
];

(async () => {
  if (process.argv.length !== 3) throw new Error('usage: ort-attention-fixture.js OUT.h5');
  const version = require('onnxruntime-node/package.json').version;
  const out = [];
  for (const c of cases) {
    const { H, KV, hd, S, T } = c, P = S - T;
    const q = draw(T * H * hd, c.qScale || 1), k = draw(S * KV * hd), v = draw(S * KV * hd);
    const sinks = c.sinks ? draw(H, c.sinks.scale, c.sinks.mean || 0) : null;
    c.past = P > 0;
    // ORT's layouts: new q/k/v [1, T, n·hd] (BSNH), past keys [1, KV, P, hd] (BNSH).
    const bnsh = (x, rows) => {
      const t = new Float32Array(KV * rows * hd);
      for (let s = 0; s < rows; ++s) for (let g = 0; g < KV; ++g)
        for (let d = 0; d < hd; ++d) t[(g * rows + s) * hd + d] = x[(s * KV + g) * hd + d];
      return t;
    };
    const feeds = {
      q: new ort.Tensor('float32', q, [1, T, H * hd]),
      k: new ort.Tensor('float32', k.slice(P * KV * hd), [1, T, KV * hd]),
      v: new ort.Tensor('float32', v.slice(P * KV * hd), [1, T, KV * hd]),
      seqlens_k: new ort.Tensor('int32', Int32Array.from([S - 1]), [1]),
      total_len: new ort.Tensor('int32', Int32Array.from([S]), []),
    };
    if (c.past) {
      feeds.past_key = new ort.Tensor('float32', bnsh(k, P), [1, KV, P, hd]);
      feeds.past_value = new ort.Tensor('float32', bnsh(v, P), [1, KV, P, hd]);
    }
    if (sinks) feeds.sink = new ort.Tensor('float32', sinks, [H]);
    const session = await ort.InferenceSession.create(gqaModel(c), { intraOpNumThreads: 1 });
    const r = await session.run(feeds);
    out.push({ name: c.name, what: c.what, H, KV, hd, S, T, window: c.window || 0, softcap: c.softcap || 0,
               q: Array.from(q), k: Array.from(k), v: Array.from(v), sinks: sinks ? Array.from(sinks) : null,
               out: Array.from(r.out.data) });
  }
  const producer = `ONNX Runtime ${version} (npm onnxruntime-node, CPU, 1 thread): GroupQueryAttention, ` +
                   'scripts/ort-attention-fixture.js';
  // The fixture (fixtures/SCHEMA.md): one case group per case; float32 inputs, ORT's float32 output as expected/out.
  writeFixture(process.argv[2], 'attention', out, producer, `
cfg = g.create_group('config')
cfg.attrs['n_heads'], cfg.attrs['n_kv_heads'], cfg.attrs['head_dim'] = c['H'], c['KV'], c['hd']
if c['window']: cfg.attrs['sliding_window'] = c['window']
if c['softcap']: cfg.attrs['attn_logit_softcapping'] = float(c['softcap'])
if c['sinks'] is not None: cfg.attrs['attn_sinks'] = 1
S, T, H, KV, hd = c['S'], c['T'], c['H'], c['KV'], c['hd']
i = g.create_group('inputs')
i['q'] = np.asarray(c['q'], np.float32).reshape(T, H * hd)
i['k'] = np.asarray(c['k'], np.float32).reshape(S, KV * hd)
i['v'] = np.asarray(c['v'], np.float32).reshape(S, KV * hd)
i['k_positions'] = np.arange(S, dtype=np.int64)
i['q_positions'] = np.arange(S - T, S, dtype=np.int64)
if c['sinks'] is not None: i['sinks'] = np.asarray(c['sinks'], np.float32)
g.create_group('expected')['out'] = np.asarray(c['out'], np.float32).reshape(T, H * hd)
`);
  console.log(`${process.argv[2]}: ${out.length} attention cases, ${producer}`);
})().catch(e => { console.error(e.message || e); process.exit(2); });

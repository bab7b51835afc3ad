// scripts/ort-moe-fixture.js — a desk program, not part of the build:
// gpt-oss's mixture of experts computed by ONNX Runtime's CPU MoE
// (com.microsoft: softmax over the router's logits, top-k, renormalised;
// experts with interleaved gate/up, SwiGLU clamped at `swiglu_limit` with
// alpha 1.702 and up + 1, per-expert biases, the down bias before the
// routing weight), written as a conform fixture of op `moe` whose expected
// output is ORT's. `conform --fixtures` then judges conform's reference and
// every implementation against code nobody here wrote.
//
//   mkdir /tmp/ort && cd /tmp/ort && npm install onnxruntime-node --ignore-scripts
//   NODE_PATH=/tmp/ort/node_modules node scripts/ort-moe-fixture.js fixtures/moe-ort-gpt-oss.h5
//
// The graph: logits = x @ w_router + router_bias (MatMul, Add), then MoE(x,
// logits, fc1, fc1_bias, fc2, fc2_bias) with k, activation_type "swiglu",
// swiglu_fusion 1 (interleaved), normalize_routing_weights 1. ORT holds each
// expert's weights transposed ([E, 2 Fe, D] and [E, D, Fe], B of a GEMM with
// transB); conform's are [in, out] stacked ([E D, 2 Fe], [E Fe, D]). ORT
// computes in float32 and outputs only the MoE's `out` (no route).
const ort = require('onnxruntime-node');

const { bytesField, str, attrInt, attrFloat, attrString, vinfo, nodeProto, modelProto, FLOAT } = require('./onnx-proto');
const { draws, writeFixture } = require('./fixture-writer');

function moeModel(c) {
  const matmul = bytesField(1, nodeProto(['x', 'w_router'], ['l0'], 'MatMul'));
  const add = bytesField(1, nodeProto(['l0', 'router_bias'], ['logits'], 'Add'));
  const attrs = [attrInt('k', c.K), attrString('activation_type', 'swiglu'), attrInt('normalize_routing_weights', 1),
                 attrInt('swiglu_fusion', 1), attrFloat('swiglu_limit', c.limit), attrFloat('activation_alpha', 1.702),
                 attrFloat('activation_beta', 1.0)];
  const moe = bytesField(1, nodeProto(['x', 'logits', 'fc1', 'fc1_bias', 'fc2', 'fc2_bias'], ['out'], 'MoE', attrs,
                                      'com.microsoft'));
  const inputs = [vinfo('x', FLOAT, 2), vinfo('w_router', FLOAT, 2), vinfo('router_bias', FLOAT, 1), vinfo('fc1', FLOAT, 3),
                  vinfo('fc1_bias', FLOAT, 2), vinfo('fc2', FLOAT, 3), vinfo('fc2_bias', FLOAT, 2)];
  const graph = [...matmul, ...add, ...moe, ...str(2, 'moe'), ...inputs.flatMap(i => bytesField(11, i)),
                 ...bytesField(12, vinfo('out', FLOAT, 2))];
  return modelProto(graph, 21, true);
}

// ---- inputs: xorshift64 + Box-Muller, rounded to float32 ----
const { draw } = draws(0x9E3779B97F4A7C15n);

// Where each convention shows: gates past the limit (gate weights scaled up), a limit that binds most
// activations, a router bias that decides the choice, one token with many experts.
const cases = [
  { name: 'gpt_oss_limit7', what: 'gpt-oss: top-4 of 8, limit 7 with gate and up past it (w13 scaled 3x), biases',
    T: 12, D: 32, E: 8, K: 4, Fe: 16, limit: 7, w13Scale: 3, routerBias: 1 },
  { name: 'limit_binding', what: 'limit 1.5, which clamps most gates and ups; top-2 of 16, router bias N(0, 2)',
    T: 9, D: 24, E: 16, K: 2, Fe: 12, limit: 1.5, w13Scale: 1, routerBias: 2 },
  { name: 'decode_top4_of_32', what: 'one token (a decode step), top-4 of 32 experts, limit 7',
    T: 1, D: 64, E: 32, K: 4, Fe: 32, limit: 7, w13Scale: 2, routerBias: 1 },
  { name: 'prefill_top1', what: 'top-1 of 4 (every weight renormalises to 1), 20 tokens, limit 7',
    T: 20, D: 16, E: 4, K: 1, Fe: 8, limit: 7, w13Scale: 2, routerBias: 0.5 },
];

(async () => {
  if (process.argv.length !== 3) throw new Error('usage: ort-moe-fixture.js OUT.h5');
  const version = require('onnxruntime-node/package.json').version;
  const out = [];
  for (const c of cases) {
    const { T, D, E, Fe } = c;
    const x = draw(T * D), wr = draw(D * E, 1 / Math.sqrt(D)), rb = draw(E, c.routerBias);
    const w13 = draw(E * D * 2 * Fe, c.w13Scale / Math.sqrt(D)), w2 = draw(E * Fe * D, 1 / Math.sqrt(Fe));
    const b13 = draw(E * 2 * Fe, 0.5), b2 = draw(E * D, 0.5);
    // ORT's layouts: fc1[e][j][d] = w13[e D + d][j], fc2[e][d][f] = w2[e Fe + f][d].
    const fc1 = new Float32Array(E * 2 * Fe * D), fc2 = new Float32Array(E * D * Fe);
    for (let e = 0; e < E; ++e) {
      for (let d = 0; d < D; ++d)
        for (let j = 0; j < 2 * Fe; ++j) fc1[(e * 2 * Fe + j) * D + d] = w13[(e * D + d) * 2 * Fe + j];
      for (let f = 0; f < Fe; ++f)
        for (let d = 0; d < D; ++d) fc2[(e * D + d) * Fe + f] = w2[(e * Fe + f) * D + d];
    }
    const feeds = {
      x: new ort.Tensor('float32', x, [T, D]), w_router: new ort.Tensor('float32', wr, [D, E]),
      router_bias: new ort.Tensor('float32', rb, [E]), fc1: new ort.Tensor('float32', fc1, [E, 2 * Fe, D]),
      fc1_bias: new ort.Tensor('float32', b13, [E, 2 * Fe]), fc2: new ort.Tensor('float32', fc2, [E, D, Fe]),
      fc2_bias: new ort.Tensor('float32', b2, [E, D]),
    };
    const session = await ort.InferenceSession.create(moeModel(c), { intraOpNumThreads: 1 });
    const r = await session.run(feeds);
    out.push({ ...c, x: Array.from(x), w_router: Array.from(wr), router_bias: Array.from(rb), w13: Array.from(w13),
               w2: Array.from(w2), b13: Array.from(b13), b2: Array.from(b2), out: Array.from(r.out.data) });
  }
  const producer = `ONNX Runtime ${version} (npm onnxruntime-node, CPU, 1 thread): MatMul, Add, com.microsoft MoE, ` +
                   'scripts/ort-moe-fixture.js';
  // The fixture (fixtures/SCHEMA.md): one `moe` group per case; float32 inputs, ORT's float32 output as expected/out.
  writeFixture(process.argv[2], 'moe', out, producer, `
T, D, E, K, Fe = c['T'], c['D'], c['E'], c['K'], c['Fe']
a = g.create_group('config').attrs
a['d_model'], a['n_experts'], a['n_experts_per_tok'], a['moe_ffn_dim'] = D, E, K, Fe
a['moe_router_bias'], a['moe_norm_topk_prob'], a['moe_gate_up_interleaved'], a['moe_expert_bias'] = 1, 1, 1, 1
a['moe_swiglu_limit'] = float(c['limit'])
i = g.create_group('inputs')
f32 = lambda k, *shape: np.asarray(c[k], np.float32).reshape(*shape)
i['x'], i['w_router'], i['router_bias'] = f32('x', T, D), f32('w_router', D, E), f32('router_bias', E)
i['w13'], i['w2'] = f32('w13', E * D, 2 * Fe), f32('w2', E * Fe, D)
i['b13'], i['b2'] = f32('b13', E, 2 * Fe), f32('b2', E, D)
g.create_group('expected')['out'] = f32('out', T, D)
`);
  console.log(`${process.argv[2]}: ${out.length} moe cases, ${producer}`);
})().catch(e => { console.error(e.message || e); process.exit(2); });

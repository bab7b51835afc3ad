// scripts/fixture-writer.js — what the desk programs that write a conform
// fixture from another producer's outputs share (scripts/ort-*-fixture.js):
// a seeded normal draw, and the HDF5 file (fixtures/SCHEMA.md) written by
// h5py from the cases as JSON.
const { spawnSync } = require('child_process');

// xorshift64 + Box-Muller, rounded to float32: draws(seed).draw(n, scale, mean).
function draws(seed) {
  let state = BigInt(seed);
  const uniform = () => {
    const M = 0xFFFFFFFFFFFFFFFFn;
    state ^= (state << 13n) & M; state ^= state >> 7n; state ^= (state << 17n) & M;
    return (Number(state >> 11n) + 0.5) / 2 ** 53;
  };
  const normal = () => Math.sqrt(-2 * Math.log(uniform())) * Math.cos(2 * Math.PI * uniform());
  return { draw: (n, scale = 1, mean = 0) => Float32Array.from({ length: n }, () => mean + scale * normal()) };
}

// One group per case: attrs op, description (the case's `what`), producer;
// `perCase` is Python run with g (the group) and c (the case) in scope, which
// writes config/, inputs/ and expected/.
function writeFixture(path, op, cases, producer, perCase) {
  const py = `
import h5py, json, sys, numpy as np
d = json.load(sys.stdin)
with h5py.File(sys.argv[1], 'w') as f:
    f.attrs['conform_schema'] = 'conform-fixture/1'
    for c in d['cases']:
        g = f.create_group(c['name'])
        g.attrs['op'] = ${JSON.stringify(op)}
        g.attrs['description'] = c['what']
        g.attrs['producer'] = d['producer']
${perCase.trim().split('\n').map(l => '        ' + l).join('\n')}
`;
  const r = spawnSync('/usr/bin/python3', ['-c', py, path],
                      { input: JSON.stringify({ cases, producer }), stdio: ['pipe', 'inherit', 'inherit'] });
  if (r.status !== 0) throw new Error(`writing ${path} failed`);
}

module.exports = { draws, writeFixture };

// scripts/onnx-proto.js — the few protobuf messages an ONNX model needs,
// written by hand (no onnx package), for the desk programs that run ONNX
// Runtime (scripts/ort-*.js). Each builder returns a byte array.
//
// ModelProto: ir_version 1, opset_import 8, graph 7. GraphProto: node 1,
// name 2, initializer 5, input 11, output 12. NodeProto: input 1, output 2,
// op_type 4, attribute 5, domain 7. AttributeProto: name 1, f 2, i 3, type 20.
// TensorProto: dims 1, data_type 2, name 8, raw_data 9.

// varint of an int64 (two's complement: a -1 is ten bytes)
function varint(n) {
  const b = [];
  n = BigInt.asUintN(64, BigInt(n));
  do { let x = Number(n & 0x7fn); n >>= 7n; if (n) x |= 0x80; b.push(x); } while (n);
  return b;
}
const key = (f, t) => varint((f << 3) | t);
const bytesField = (f, bytes) => [...key(f, 2), ...varint(bytes.length), ...bytes];
const str = (f, s) => bytesField(f, [...Buffer.from(s)]);
const int = (f, v) => [...key(f, 0), ...varint(v)];
const f32 = (f, v) => { const b = Buffer.alloc(4); b.writeFloatLE(v); return [...key(f, 5), ...b]; };

const INT_ATTR = 2, FLOAT_ATTR = 1, STRING_ATTR = 3;
const attrInt = (name, v) => bytesField(5, [...str(1, name), ...int(3, v), ...int(20, INT_ATTR)]);
const attrFloat = (name, v) => bytesField(5, [...str(1, name), ...f32(2, v), ...int(20, FLOAT_ATTR)]);
const attrString = (name, v) => bytesField(5, [...str(1, name), ...str(4, v), ...int(20, STRING_ATTR)]);

// TensorProto data types
const FLOAT = 1, INT32 = 6, INT64 = 7, FLOAT8E4M3FN = 17, FLOAT8E5M2 = 19;

// ValueInfoProto of a rank-`rank` tensor of `elem` with symbolic dims.
const vinfo = (name, elem, rank) =>
  [...str(1, name), ...bytesField(2, bytesField(1, [...int(1, elem),
    ...bytesField(2, Array.from({ length: rank }, (_, i) => bytesField(1, str(2, `d${i}`))).flat())]))];

// A NodeProto's bytes (to go into the graph as field 1).
const nodeProto = (ins, outs, op, attrs = [], domain = '') =>
  [...ins.flatMap(i => str(1, i)), ...outs.flatMap(o => str(2, o)), ...str(4, op), ...attrs.flat(),
   ...(domain ? str(7, domain) : [])];

// The model: IR 9, ONNX opset `onnxOpset` (and com.microsoft 1 when asked), the graph's bytes.
const modelProto = (graph, onnxOpset, microsoft = false) =>
  Uint8Array.from([...int(1, 9), ...bytesField(8, [...str(1, ''), ...int(2, onnxOpset)]),
                   ...(microsoft ? bytesField(8, [...str(1, 'com.microsoft'), ...int(2, 1)]) : []),
                   ...bytesField(7, graph)]);

module.exports = { varint, key, bytesField, str, int, f32, attrInt, attrFloat, attrString, vinfo, nodeProto, modelProto,
                   FLOAT, INT32, INT64, FLOAT8E4M3FN, FLOAT8E5M2 };

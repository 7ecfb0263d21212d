#!/usr/bin/env python3
"""Builds small ONNX models with python3-onnx's helper API, and their reference outputs.

    make_models.py OUT_DIR

Writes OUT_DIR/<model>/model.onnx and OUT_DIR/<model>/test_data_set_0/{input,output}_N.pb,
the layout of ONNX's own test data, so kiln_onnx_conformance runs them. The reference
outputs come from NumPy implementations written here, independent of kiln.

Models:
  mlp                 784 -> 128 -> 10: Gemm, Relu, Gemm, Softmax (weights as initializers)
  transformer_block   token embedding (Gather) plus positions, then pre-norm attention + MLP
                      over [batch, seq, dim]: LayerNormalization, MatMul, Transpose,
                      Softmax, Erf-based GELU, residual adds
  cnn                 Conv (padded, then strided and grouped), BatchNormalization, Relu,
                      MaxPool, AveragePool, Flatten, Gemm, Softmax over [2, 3, 16, 16] images
  recurrent           a bidirectional LSTM with peepholes and sequence lengths, then a
                      reverse GRU (linear_before_reset) over its output, batch-first
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


def save(out_dir, name, graph, inputs, outputs):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="kiln make_models.py")
    onnx.checker.check_model(model)
    d = os.path.join(out_dir, name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    onnx.save(model, os.path.join(d, "model.onnx"))
    for kind, values, infos in (("input", inputs, graph.input), ("output", outputs, graph.output)):
        for i, (v, info) in enumerate(zip(values, infos)):
            t = numpy_helper.from_array(v, info.name)
            with open(os.path.join(d, "test_data_set_0", f"{kind}_{i}.pb"), "wb") as f:
                f.write(t.SerializeToString())


def init(name, a):
    return numpy_helper.from_array(a.astype(np.float32), name)


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def layer_norm(x, g, b, eps=1e-5):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * g + b


def erf(x):
    # Abramowitz-Stegun 7.1.26 is too coarse for a reference: use math.erf elementwise.
    import math
    return np.vectorize(math.erf)(x.astype(np.float64)).astype(x.dtype)


def mlp(out_dir, rng):
    n, d_in, d_hidden, d_out = 32, 784, 128, 10
    x = rng.standard_normal((n, d_in)).astype(np.float32)
    w1 = (rng.standard_normal((d_hidden, d_in)) / np.sqrt(d_in)).astype(np.float32)
    b1 = rng.standard_normal(d_hidden).astype(np.float32) * 0.1
    w2 = (rng.standard_normal((d_out, d_hidden)) / np.sqrt(d_hidden)).astype(np.float32)
    b2 = rng.standard_normal(d_out).astype(np.float32) * 0.1
    nodes = [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1, name="fc1"),
        helper.make_node("Relu", ["h"], ["a"], name="relu"),
        helper.make_node("Gemm", ["a", "w2", "b2"], ["logits"], transB=1, name="fc2"),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=1, name="softmax"),
    ]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, d_in])],
                              [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [n, d_out])],
                              [init("w1", w1), init("b1", b1), init("w2", w2), init("b2", b2)])
    y = softmax(np.maximum(x @ w1.T + b1, 0) @ w2.T + b2, axis=1)
    save(out_dir, "mlp", graph, [x], [y.astype(np.float32)])


def transformer_block(out_dir, rng):
    batch, seq, dim, hidden, vocab = 2, 16, 32, 64, 50
    tokens = rng.integers(0, vocab, (batch, seq)).astype(np.int64)
    p = {name: (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)
         for name, shape in [("wq", (dim, dim)), ("wk", (dim, dim)), ("wv", (dim, dim)), ("wo", (dim, dim)),
                             ("w1", (dim, hidden)), ("w2", (hidden, dim))]}
    p["emb"] = rng.standard_normal((vocab, dim)).astype(np.float32)
    p["pos"] = (0.1 * rng.standard_normal((seq, dim))).astype(np.float32)
    p["b1"] = rng.standard_normal(hidden).astype(np.float32) * 0.1
    p["b2"] = rng.standard_normal(dim).astype(np.float32) * 0.1
    for ln in ("ln1", "ln2"):
        p[ln + "_g"] = (1 + 0.1 * rng.standard_normal(dim)).astype(np.float32)
        p[ln + "_b"] = (0.1 * rng.standard_normal(dim)).astype(np.float32)
    consts = {"scale": np.array(1 / np.sqrt(dim), np.float32), "half": np.array(0.5, np.float32),
              "one": np.array(1.0, np.float32), "inv_sqrt2": np.array(1 / np.sqrt(2), np.float32)}
    mk = helper.make_node
    nodes = [
        mk("Gather", ["emb", "tokens"], ["tok"], axis=0, name="embedding"),
        mk("Add", ["tok", "pos"], ["x"], name="positions"),
        mk("LayerNormalization", ["x", "ln1_g", "ln1_b"], ["n1"], axis=-1, epsilon=1e-5, name="ln1"),
        mk("MatMul", ["n1", "wq"], ["q"], name="q"),
        mk("MatMul", ["n1", "wk"], ["k"], name="k"),
        mk("MatMul", ["n1", "wv"], ["v"], name="v"),
        mk("Transpose", ["k"], ["kt"], perm=[0, 2, 1], name="kt"),
        mk("MatMul", ["q", "kt"], ["scores_raw"], name="scores"),
        mk("Mul", ["scores_raw", "scale"], ["scores"], name="scale"),
        mk("Softmax", ["scores"], ["attn"], axis=-1, name="attn"),
        mk("MatMul", ["attn", "v"], ["ctx"], name="ctx"),
        mk("MatMul", ["ctx", "wo"], ["proj"], name="proj"),
        mk("Add", ["x", "proj"], ["r1"], name="residual1"),
        mk("LayerNormalization", ["r1", "ln2_g", "ln2_b"], ["n2"], axis=-1, epsilon=1e-5, name="ln2"),
        mk("MatMul", ["n2", "w1"], ["h_raw"], name="fc1"),
        mk("Add", ["h_raw", "b1"], ["h"], name="fc1_bias"),
        # GELU (opset 17 has no Gelu op): 0.5 x (1 + erf(x / sqrt 2))
        mk("Mul", ["h", "inv_sqrt2"], ["h_scaled"], name="gelu_scale"),
        mk("Erf", ["h_scaled"], ["h_erf"], name="gelu_erf"),
        mk("Add", ["h_erf", "one"], ["h_erf1"], name="gelu_add"),
        mk("Mul", ["h", "h_erf1"], ["h_gelu2"], name="gelu_mul"),
        mk("Mul", ["h_gelu2", "half"], ["g"], name="gelu_half"),
        mk("MatMul", ["g", "w2"], ["o_raw"], name="fc2"),
        mk("Add", ["o_raw", "b2"], ["o"], name="fc2_bias"),
        mk("Add", ["r1", "o"], ["y"], name="residual2"),
    ]
    inits = [init(k, v) for k, v in p.items()] + [init(k, v) for k, v in consts.items()]
    graph = helper.make_graph(nodes, "transformer_block",
                              [helper.make_tensor_value_info("tokens", TensorProto.INT64, [batch, seq])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, seq, dim])], inits)
    x = p["emb"][tokens] + p["pos"]
    n1 = layer_norm(x, p["ln1_g"], p["ln1_b"])
    q, k, v = n1 @ p["wq"], n1 @ p["wk"], n1 @ p["wv"]
    attn = softmax(q @ k.transpose(0, 2, 1) / np.sqrt(dim))
    r1 = x + (attn @ v) @ p["wo"]
    h = layer_norm(r1, p["ln2_g"], p["ln2_b"]) @ p["w1"] + p["b1"]
    y = r1 + (0.5 * h * (1 + erf(h / np.sqrt(2)))) @ p["w2"] + p["b2"]
    save(out_dir, "transformer_block", graph, [tokens], [y.astype(np.float32)])


def conv2d(x, w, b, stride=1, pad=0, group=1):
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    y = np.zeros((n, m, oh, ow), np.float64)
    mg = m // group
    for g in range(group):
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, g * cg:(g + 1) * cg, i * stride:i * stride + kh, j * stride:j * stride + kw]
                y[:, g * mg:(g + 1) * mg, i, j] = np.einsum("nckl,mckl->nm", patch, w[g * mg:(g + 1) * mg])
    return (y + b.reshape(1, -1, 1, 1)).astype(np.float32)


def pool2d(x, k, stride, reduce):
    n, c, h, w = x.shape
    oh, ow = (h - k) // stride + 1, (w - k) // stride + 1
    y = np.zeros((n, c, oh, ow), np.float32)
    for i in range(oh):
        for j in range(ow):
            y[:, :, i, j] = reduce(x[:, :, i * stride:i * stride + k, j * stride:j * stride + k], axis=(2, 3))
    return y


def cnn(out_dir, rng):
    n, classes = 2, 10
    x = rng.standard_normal((n, 3, 16, 16)).astype(np.float32)
    w1 = (rng.standard_normal((8, 3, 3, 3)) / np.sqrt(27)).astype(np.float32)
    b1 = (0.1 * rng.standard_normal(8)).astype(np.float32)
    gamma = (1 + 0.1 * rng.standard_normal(8)).astype(np.float32)
    beta = (0.1 * rng.standard_normal(8)).astype(np.float32)
    mean = (0.1 * rng.standard_normal(8)).astype(np.float32)
    var = (1 + 0.1 * rng.random(8)).astype(np.float32)
    w2 = (rng.standard_normal((16, 4, 3, 3)) / np.sqrt(36)).astype(np.float32)  # 2 groups of 4 channels
    b2 = (0.1 * rng.standard_normal(16)).astype(np.float32)
    wf = (rng.standard_normal((classes, 16 * 3 * 3)) / 12).astype(np.float32)
    bf = (0.1 * rng.standard_normal(classes)).astype(np.float32)
    mk = helper.make_node
    nodes = [
        mk("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        mk("BatchNormalization", ["c1", "gamma", "beta", "mean", "var"], ["bn"], epsilon=1e-5, name="bn1"),
        mk("Relu", ["bn"], ["r1"], name="relu1"),
        mk("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2], name="pool1"),
        mk("Conv", ["p1", "w2", "b2"], ["c2"], strides=[2, 2], group=2, name="conv2"),
        mk("Relu", ["c2"], ["r2"], name="relu2"),
        mk("AveragePool", ["r2"], ["p2"], kernel_shape=[1, 1], name="pool2"),
        mk("Flatten", ["p2"], ["f"], axis=1, name="flatten"),
        mk("Gemm", ["f", "wf", "bf"], ["logits"], transB=1, name="fc"),
        mk("Softmax", ["logits"], ["probs"], axis=1, name="softmax"),
    ]
    inits = [init(k, v) for k, v in dict(w1=w1, b1=b1, gamma=gamma, beta=beta, mean=mean, var=var, w2=w2, b2=b2,
                                           wf=wf, bf=bf).items()]
    graph = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, 3, 16, 16])],
                              [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [n, classes])], inits)
    c1 = conv2d(x, w1, b1, pad=1)
    bn = (c1 - mean.reshape(1, -1, 1, 1)) / np.sqrt(var.reshape(1, -1, 1, 1) + 1e-5) * gamma.reshape(1, -1, 1, 1) \
        + beta.reshape(1, -1, 1, 1)
    p1 = pool2d(np.maximum(bn, 0), 2, 2, np.max)
    r2 = np.maximum(conv2d(p1, w2, b2, stride=2, group=2), 0)
    y = softmax(r2.reshape(n, -1) @ wf.T + bf, axis=1)
    save(out_dir, "cnn", graph, [x], [y.astype(np.float32)])


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def lstm_ref(x, w, r, b, p, h, c, lengths, reverse):
    """One direction of ONNX's LSTM (gates i, o, f, c) over x [seq, batch, in]."""
    hidden = r.shape[1]
    seq = x.shape[0]
    y = np.zeros((seq, x.shape[1], hidden), x.dtype)
    for t in (range(seq - 1, -1, -1) if reverse else range(seq)):
        g = x[t] @ w.T + h @ r.T + b[:4 * hidden] + b[4 * hidden:]
        gi, go, gf, gc = (g[:, k * hidden:(k + 1) * hidden] for k in range(4))
        i = sigmoid(gi + p[:hidden] * c)
        f = sigmoid(gf + p[2 * hidden:] * c)
        c_new = f * c + i * np.tanh(gc)
        o = sigmoid(go + p[hidden:2 * hidden] * c_new)
        h_new = o * np.tanh(c_new)
        live = (t < lengths)[:, None]
        h, c = np.where(live, h_new, h), np.where(live, c_new, c)
        y[t] = np.where(live, h_new, 0)
    return y, h, c


def gru_ref(x, w, r, b, reverse):
    """One direction of ONNX's GRU (gates z, r, h) with linear_before_reset = 1."""
    hidden = r.shape[1]
    h = np.zeros((x.shape[1], hidden), x.dtype)
    y = np.zeros((x.shape[0], x.shape[1], hidden), x.dtype)
    for t in (range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])):
        xw = x[t] @ w.T + b[:3 * hidden]
        hr = h @ r.T + b[3 * hidden:]
        z = sigmoid(xw[:, :hidden] + hr[:, :hidden])
        rs = sigmoid(xw[:, hidden:2 * hidden] + hr[:, hidden:2 * hidden])
        cand = np.tanh(xw[:, 2 * hidden:] + rs * hr[:, 2 * hidden:])
        h = (1 - z) * cand + z * h
        y[t] = h
    return y, h


def recurrent(out_dir, rng):
    batch, seq, d_in, hidden, g_hidden = 3, 5, 4, 6, 5
    f = np.float64  # references in double; the model is f32
    x = rng.standard_normal((batch, seq, d_in)).astype(np.float32)
    lengths = np.array([5, 3, 1], np.int32)
    p = {"lw": rng.standard_normal((2, 4 * hidden, d_in)) * 0.5, "lr": rng.standard_normal((2, 4 * hidden, hidden)) * 0.5,
         "lb": rng.standard_normal((2, 8 * hidden)) * 0.1, "lp": rng.standard_normal((2, 3 * hidden)) * 0.3,
         "h0": rng.standard_normal((batch, 2, hidden)) * 0.5, "c0": rng.standard_normal((batch, 2, hidden)) * 0.5,
         "gw": rng.standard_normal((1, 3 * g_hidden, 2 * hidden)) * 0.4,
         "gr": rng.standard_normal((1, 3 * g_hidden, g_hidden)) * 0.4, "gb": rng.standard_normal((1, 6 * g_hidden)) * 0.1}
    p = {k: v.astype(np.float32) for k, v in p.items()}
    mk = helper.make_node
    nodes = [
        mk("LSTM", ["x", "lw", "lr", "lb", "lengths", "h0", "c0", "lp"], ["ly", "lh", "lc"], hidden_size=hidden,
           direction="bidirectional", layout=1, name="lstm"),
        mk("Reshape", ["ly", "shape"], ["flat"], name="merge_directions"),
        mk("GRU", ["flat", "gw", "gr", "gb"], ["gy", "gh"], hidden_size=g_hidden, direction="reverse",
           linear_before_reset=1, layout=1, name="gru"),
    ]
    inits = [init(k, v) for k, v in p.items()]
    inits.append(numpy_helper.from_array(np.array([batch, seq, 2 * hidden], np.int64), "shape"))
    graph = helper.make_graph(
        nodes, "recurrent",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, seq, d_in]),
         helper.make_tensor_value_info("lengths", TensorProto.INT32, [batch])],
        [helper.make_tensor_value_info("gy", TensorProto.FLOAT, [batch, seq, 1, g_hidden]),
         helper.make_tensor_value_info("lh", TensorProto.FLOAT, [batch, 2, hidden]),
         helper.make_tensor_value_info("lc", TensorProto.FLOAT, [batch, 2, hidden])], inits)
    xs = x.astype(f).transpose(1, 0, 2)
    ys, hs, cs = [], [], []
    for d in range(2):
        y, h, c = lstm_ref(xs, p["lw"][d].astype(f), p["lr"][d].astype(f), p["lb"][d].astype(f), p["lp"][d].astype(f),
                           p["h0"][:, d].astype(f), p["c0"][:, d].astype(f), lengths, reverse=d == 1)
        ys.append(y)
        hs.append(h)
        cs.append(c)
    ly = np.stack(ys, 1).transpose(2, 0, 1, 3)  # [batch, seq, 2, hidden]
    flat = ly.reshape(batch, seq, 2 * hidden).transpose(1, 0, 2)
    gy, _ = gru_ref(flat, p["gw"][0].astype(f), p["gr"][0].astype(f), p["gb"][0].astype(f), reverse=True)
    outs = [gy[:, None].transpose(2, 0, 1, 3), np.stack(hs, 1), np.stack(cs, 1)]
    save(out_dir, "recurrent", graph, [x, lengths], [o.astype(np.float32) for o in outs])


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    rng = np.random.default_rng(7)
    mlp(sys.argv[1], rng)
    transformer_block(sys.argv[1], rng)
    cnn(sys.argv[1], rng)
    recurrent(sys.argv[1], rng)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Export real model architectures to ONNX, with test data, for kiln's importer.

Every architecture in MODELS is built with random weights (no downloads: torchvision and
timm with weights=None, transformers from a config), exported by both of PyTorch's ONNX
exporters, and run once by onnxruntime to make the expected outputs:

    OUT/<model>-<exporter>/model.onnx            (+ model.onnx.data for large dynamo exports)
    OUT/<model>-<exporter>/test_data_set_0/input_K.pb, output_K.pb
    OUT/<model>-<exporter>/meta.json             (opset, shapes, ORT timings, torch-vs-ORT diff)
    OUT/summary.json                             (every row of the run, versions)

The test data has the layout of ONNX's own test suite (TensorProto files, K in the order of
the graph's inputs and outputs), so the same runner reads both.

    export.py [--small] [--out DIR] [--only name,name] [--exporters torchscript,dynamo]

--small builds reduced configurations of the same architectures into tests/onnx/real_models
(weights inside model.onnx, a few MB in all); the default builds the real-size ones into
benchmarks/models/out (git-ignored).
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import importlib.metadata
import json
import re
import shutil
import statistics
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import Callable

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import numpy_helper

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
EXPORTERS = ("torchscript", "dynamo")
TORCHSCRIPT_OPSET = 17  # what users of the TorchScript exporter commonly ask for
ORT_THREADS = 2


# --------------------------------------------------------------------------------------
# What an export needs


@dataclasses.dataclass
class Spec:
    """A model ready to export: the module, its test inputs and which axes are dynamic."""

    architecture: str
    model: torch.nn.Module
    inputs: dict[str, np.ndarray]  # in the order of forward()'s arguments
    dynamic: dict[str, dict[int, str]]  # input name -> {axis: dim name}
    output_names: list[str]
    output_dynamic: dict[str, dict[int, str]]  # for TorchScript's dynamic_axes
    config: dict = dataclasses.field(default_factory=dict)


def perturb_trivial_params(model: torch.nn.Module) -> None:
    """Give norm layers and layer scales values like trained ones.

    Freshly initialised, BatchNorm's running statistics make it the identity, LayerNorm and
    RMSNorm scale by one, ConvNeXt multiplies every residual branch by 1e-6 and ViT's
    classifier is all zeros. A converter could then drop or mangle those ops (or a whole
    block) and still match onnxruntime; trained checkpoints never look like that. Draws
    from torch's seeded generator.
    """
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
                module.running_mean.normal_(0.0, 0.1)
                module.running_var.uniform_(0.5, 1.5)
            is_norm = "norm" in type(module).__name__.lower()
            weight = getattr(module, "weight", None)
            if is_norm and isinstance(weight, torch.nn.Parameter) and weight.dim() == 1:
                weight.uniform_(0.5, 1.5)
                bias = getattr(module, "bias", None)
                if isinstance(bias, torch.nn.Parameter):
                    bias.normal_(0.0, 0.1)
        for name, param in model.named_parameters():
            if name.endswith("layer_scale"):  # torchvision ConvNeXt's CNBlock
                param.uniform_(0.5, 1.5)
            elif param.dim() >= 2 and not param.any():  # torchvision ViT's zero head
                param.normal_(0.0, 0.02)


def vision(architecture: str, model: torch.nn.Module, batch: int, size: int) -> Spec:
    """An image classifier: NCHW images ~N(0,1), batch dynamic as deployed models have."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, 3, size, size), dtype=np.float32)
    return Spec(
        architecture=architecture,
        model=model,
        inputs={"input": x},
        dynamic={"input": {0: "batch"}},
        output_names=["logits"],
        output_dynamic={"logits": {0: "batch"}},
        config={"batch": batch, "image_size": size},
    )


class TextModel(torch.nn.Module):
    """A transformers model seen as (input_ids, attention_mask) -> tensors.

    Both exporters then see plain tensors in and out, not a ModelOutput holding a KV cache,
    which is what a user exporting for inference writes too.
    """

    def __init__(self, model: torch.nn.Module, outputs: list[str], **kwargs):
        super().__init__()
        self.model = model
        self.outputs = outputs
        self.kwargs = kwargs

    def forward(self, input_ids, attention_mask):
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, **self.kwargs)
        return tuple(out[k] for k in self.outputs)


def text(architecture: str, model_cls, config, batch: int, seq: int, outputs: list[str],
         **kwargs) -> Spec:
    """A transformers model with random token ids and a right-padded attention mask."""
    model = TextModel(model_cls(config), outputs, **kwargs)
    rng = np.random.default_rng(0)
    ids = rng.integers(0, config.vocab_size, (batch, seq), dtype=np.int64)
    # A padded batch: the last row's final positions are padding, so the mask matters
    # (with batch 1 that row is the only one).
    mask = np.ones((batch, seq), dtype=np.int64)
    mask[-1, seq - max(1, seq // 8):] = 0
    axes = {0: "batch", 1: "sequence"}
    return Spec(
        architecture=architecture,
        model=model,
        inputs={"input_ids": ids, "attention_mask": mask},
        dynamic={"input_ids": axes, "attention_mask": axes},
        output_names=outputs,
        # pooler_output is (batch, hidden); the others are (batch, sequence, ...)
        output_dynamic={k: ({0: "batch"} if k == "pooler_output" else axes) for k in outputs},
        config={"batch": batch, "sequence": seq,
                "attn_implementation": getattr(config, "_attn_implementation", None),
                **{k: v for k, v in config.to_dict().items() if k in CONFIG_KEYS}},
    )


# config fields worth recording in meta.json (the rest is defaults)
CONFIG_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
               "num_key_value_heads", "intermediate_size", "n_embd", "n_layer", "n_head",
               "dim", "n_layers", "n_heads", "hidden_dim", "d_model", "d_kv", "d_ff",
               "num_layers", "num_heads")


# --------------------------------------------------------------------------------------
# The architectures: name -> builder(small) giving the full or the reduced configuration.
# Imports are inside the builders so that --only does not pay for what it does not build.


def resnet(block: str, layers, batch: int, small: bool, small_size: int) -> Spec:
    if not small:
        import torchvision.models as tvm
        name = {"basic": "resnet18", "bottleneck": "resnet50"}[block]
        return vision(f"torchvision {name}", getattr(tvm, name)(weights=None), batch, 224)
    # torchvision hard-codes 64 base channels; timm's ResNet is the same structure
    # (7x7 stem, max pool, four stages) with the widths as a parameter.
    from timm.models.resnet import BasicBlock, Bottleneck, ResNet
    cls = {"basic": BasicBlock, "bottleneck": Bottleneck}[block]
    # zero_init_last would zero each block's last BN scale: residual branches would vanish
    model = ResNet(cls, layers, channels=(8, 16, 32, 64), stem_width=8, num_classes=10,
                   zero_init_last=False)
    return vision(f"timm ResNet({cls.__name__}, {layers}, channels 8..64)", model, batch, small_size)


def mobilenet_v3_small(small: bool) -> Spec:
    import torchvision.models as tvm
    if not small:
        return vision("torchvision mobilenet_v3_small", tvm.mobilenet_v3_small(weights=None), 1, 224)
    model = tvm.mobilenet_v3_small(weights=None, width_mult=0.25, num_classes=10)
    return vision("torchvision mobilenet_v3_small(width_mult=0.25)", model, 1, 64)


def efficientnet_b0(small: bool) -> Spec:
    import torchvision.models as tvm
    if not small:
        return vision("torchvision efficientnet_b0", tvm.efficientnet_b0(weights=None), 1, 224)
    # efficientnet_b0() fixes its multipliers; the private config builder takes them
    from torchvision.models.efficientnet import EfficientNet, _efficientnet_conf
    setting, last_channel = _efficientnet_conf("efficientnet_b0", width_mult=0.25, depth_mult=0.25)
    model = EfficientNet(setting, dropout=0.2, last_channel=last_channel, num_classes=10)
    return vision("torchvision EfficientNet b0 config (width 0.25, depth 0.25: one block a stage)", model, 1, 64)


def convnext(small: bool) -> Spec:
    import torchvision.models as tvm
    if not small:
        return vision("torchvision convnext_tiny", tvm.convnext_tiny(weights=None), 1, 224)
    from torchvision.models.convnext import CNBlockConfig, ConvNeXt
    setting = [CNBlockConfig(8, 16, 1), CNBlockConfig(16, 32, 1), CNBlockConfig(32, 64, 2),
               CNBlockConfig(64, None, 1)]
    model = ConvNeXt(setting, num_classes=10)
    return vision("torchvision ConvNeXt (dims 8..64, depths 1,1,2,1)", model, 1, 32)


def vit(small: bool) -> Spec:
    import torchvision.models as tvm
    if not small:
        return vision("torchvision vit_b_16", tvm.vit_b_16(weights=None), 1, 224)
    from torchvision.models.vision_transformer import VisionTransformer
    model = VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=4,
                              hidden_dim=64, mlp_dim=128, num_classes=10)
    return vision("torchvision VisionTransformer (patch 8, width 64, mlp 128, 2 layers)", model, 1, 32)


def bert(small: bool) -> Spec:
    from transformers import BertConfig, BertModel
    if small:
        cfg = BertConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2,
                         num_attention_heads=4, intermediate_size=128,
                         max_position_embeddings=64)
    else:
        cfg = BertConfig()  # the defaults are bert-base-uncased's
    return text("transformers BertModel", BertModel, cfg, 2 if small else 1, 16 if small else 128,
                ["last_hidden_state", "pooler_output"])


def distilbert(small: bool) -> Spec:
    from transformers import DistilBertConfig, DistilBertModel
    if small:
        cfg = DistilBertConfig(vocab_size=100, dim=64, n_layers=2, n_heads=4, hidden_dim=128,
                               max_position_embeddings=64)
    else:
        cfg = DistilBertConfig()  # distilbert-base-uncased
    return text("transformers DistilBertModel", DistilBertModel, cfg, 2 if small else 1,
                16 if small else 128, ["last_hidden_state"])


def gpt2(small: bool) -> Spec:
    from transformers import GPT2Config, GPT2LMHeadModel
    if small:
        cfg = GPT2Config(vocab_size=100, n_embd=64, n_layer=2, n_head=4, n_positions=64,
                         n_inner=128)
    else:
        cfg = GPT2Config()  # gpt2 (124M)
    return text("transformers GPT2LMHeadModel", GPT2LMHeadModel, cfg, 2 if small else 1,
                16 if small else 128, ["logits"], use_cache=False)


def llama(small: bool) -> Spec:
    from transformers import LlamaConfig, LlamaForCausalLM
    if small:
        cfg = LlamaConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, intermediate_size=128,
                          max_position_embeddings=128)
    else:
        cfg = LlamaConfig(vocab_size=1000, hidden_size=256, num_hidden_layers=4,
                          num_attention_heads=8, num_key_value_heads=4, intermediate_size=688,
                          max_position_embeddings=1024)
    return text("transformers LlamaForCausalLM", LlamaForCausalLM, cfg, 2 if small else 1,
                16 if small else 96, ["logits"], use_cache=False)


def t5_encoder(small: bool) -> Spec:
    from transformers import T5Config, T5EncoderModel
    if small:
        cfg = T5Config(vocab_size=100, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4)
    else:
        cfg = T5Config()  # the defaults are t5-small's
    return text("transformers T5EncoderModel", T5EncoderModel, cfg, 2 if small else 1,
                16 if small else 128, ["last_hidden_state"])


class WhisperEncoder(torch.nn.Module):
    """transformers' Whisper encoder seen as log-mel features -> last hidden state."""

    def __init__(self, config):
        super().__init__()
        from transformers import WhisperModel
        self.encoder = WhisperModel(config).get_encoder()

    def forward(self, input_features):
        return self.encoder(input_features=input_features).last_hidden_state


def whisper_encoder(small: bool) -> Spec:
    from transformers import WhisperConfig
    if small:
        cfg = WhisperConfig(vocab_size=100, num_mel_bins=16, d_model=64, encoder_layers=2,
                            encoder_attention_heads=4, encoder_ffn_dim=128, decoder_layers=1,
                            decoder_attention_heads=4, decoder_ffn_dim=128, max_source_positions=32,
                            # the special tokens' defaults index a 51865-word vocabulary
                            pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)
    else:
        cfg = WhisperConfig(vocab_size=51865, num_mel_bins=80, d_model=384, encoder_layers=4,
                            encoder_attention_heads=6, encoder_ffn_dim=1536, decoder_layers=4,
                            decoder_attention_heads=6, decoder_ffn_dim=1536)  # whisper-tiny
    # The encoder's two convolutions halve the frames to max_source_positions, a fixed size
    # (Whisper pads every clip to 30 s): only the batch is dynamic.
    frames = 2 * cfg.max_source_positions
    x = np.random.default_rng(0).standard_normal((1, cfg.num_mel_bins, frames), dtype=np.float32)
    return Spec(
        architecture="transformers WhisperModel encoder" + (" (width 64, 2 layers, 16 mels)" if small else " (whisper-tiny)"),
        model=WhisperEncoder(cfg),
        inputs={"input_features": x},
        dynamic={"input_features": {0: "batch"}},
        output_names=["last_hidden_state"],
        output_dynamic={"last_hidden_state": {0: "batch"}},
        config={"batch": 1, "frames": frames, "num_mel_bins": cfg.num_mel_bins, "d_model": cfg.d_model,
                "encoder_layers": cfg.encoder_layers},
    )


MODELS: dict[str, Callable[[bool], Spec]] = {
    "resnet18": lambda small: resnet("basic", [1, 1, 1, 1], 1, small, small_size=64),
    # batch 4 as in the full suite; 32x32 keeps its test data small (1x1 after stage 4)
    "resnet50": lambda small: resnet("bottleneck", [1, 1, 1, 1], 4, small, small_size=32),
    "mobilenet_v3_small": mobilenet_v3_small,
    "efficientnet_b0": efficientnet_b0,
    "convnext_tiny": convnext,
    "vit_b_16": vit,
    "bert": bert,
    "distilbert": distilbert,
    "gpt2": gpt2,
    "llama": llama,
    "t5_encoder": t5_encoder,
    # T5's dynamo export fails inside the exporter (docs in README.md); Whisper's encoder
    # stands in for the encoder-decoder family there.
    "whisper_encoder": whisper_encoder,
}


def build(name: str, small: bool) -> Spec:
    torch.manual_seed(0)  # same weights on every run
    spec = MODELS[name](small)
    perturb_trivial_params(spec.model)
    spec.model.eval()
    return spec


# --------------------------------------------------------------------------------------
# Exporting


def trace_inputs(spec: Spec) -> tuple[torch.Tensor, ...]:
    """The example inputs the exporters trace with: the test inputs, batch at least 2.

    torch.export specialises any dimension whose example size is 0 or 1, so a batch-1
    example cannot give a dynamic batch; users export with a batch of 2 for that reason.
    """
    out = []
    for value in spec.inputs.values():
        t = torch.from_numpy(value)
        out.append(torch.cat([t, t]) if t.shape[0] == 1 else t)
    return tuple(out)


def export_torchscript(spec: Spec, path: Path, small: bool) -> None:
    axes = {**spec.dynamic, **spec.output_dynamic}
    torch.onnx.export(spec.model, trace_inputs(spec), str(path), dynamo=False,
                      opset_version=TORCHSCRIPT_OPSET, input_names=list(spec.inputs),
                      output_names=spec.output_names, dynamic_axes=axes)


def export_dynamo(spec: Spec, path: Path, small: bool) -> None:
    # One Dim object per name, so inputs that share an axis name (input_ids and
    # attention_mask's sequence) are the same symbol to torch.export.
    dims = {n: torch.export.Dim(n) for axes in spec.dynamic.values() for n in axes.values()}
    # A tuple in forward()'s argument order: the dict form would need forward()'s own
    # argument names (torchvision's is "x"), not the ONNX input names.
    shapes = tuple({ax: dims[n] for ax, n in spec.dynamic[inp].items()} for inp in spec.inputs)
    program = torch.onnx.export(spec.model, trace_inputs(spec), dynamo=True,
                                dynamic_shapes=shapes, input_names=list(spec.inputs),
                                output_names=spec.output_names)
    # The small suite lives in git: one self-contained file. Large ones keep the
    # exporter's default of weights beside the graph (model.onnx.data).
    program.save(str(path), external_data=not small)
    if small:
        strip_node_metadata(path)


def strip_node_metadata(path: Path) -> None:
    """Drop the dynamo exporter's per-node metadata_props from a --small export.

    They hold each node's Python stack trace and FX names (absolute paths of the machine
    that exported), a third of a small model's bytes, and mean nothing to a runtime.
    The full suite keeps them, so the importer still sees files as the exporter writes them.
    """
    model = onnx.load(str(path))
    for node in model.graph.node:
        del node.metadata_props[:]
    onnx.save(model, str(path))


EXPORT = {"torchscript": export_torchscript, "dynamo": export_dynamo}


def short_error(exc: BaseException) -> str:
    """The exception's type and the lines that say what failed.

    The exporters' messages run to pages of advice; the dynamo exporter puts the cause
    under "## Exception summary".
    """
    message = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))  # colour codes
    _, found, summary = message.partition("## Exception summary")
    lines = (summary if found else message).strip().splitlines()
    return f"{type(exc).__name__}: " + "\n".join(lines[:12])[:2000]


# --------------------------------------------------------------------------------------
# Checking with onnxruntime


def session_options() -> ort.SessionOptions:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = ORT_THREADS
    opts.inter_op_num_threads = 1
    return opts


def time_ort(path: Path, feeds: dict[str, np.ndarray]):
    """(session, median creation s, median run s, outputs): ORT's costs on this file."""
    creation = []
    for _ in range(3):
        t0 = time.perf_counter()
        sess = ort.InferenceSession(str(path), session_options(),
                                    providers=["CPUExecutionProvider"])
        creation.append(time.perf_counter() - t0)
    for _ in range(2):  # warm-up: first runs allocate and pick kernels
        outputs = sess.run(None, feeds)
    runs = []
    for _ in range(10):
        t0 = time.perf_counter()
        outputs = sess.run(None, feeds)
        runs.append(time.perf_counter() - t0)
    return sess, statistics.median(creation), statistics.median(runs), outputs


def write_test_data(folder: Path, graph: onnx.GraphProto, inputs: dict, outputs: list) -> None:
    data = folder / "test_data_set_0"
    data.mkdir()
    graph_inputs = [i.name for i in graph.input]
    for k, name in enumerate(graph_inputs):
        tensor = numpy_helper.from_array(inputs[name], name)
        (data / f"input_{k}.pb").write_bytes(tensor.SerializeToString())
    for k, (out, value) in enumerate(zip(graph.output, outputs)):
        tensor = numpy_helper.from_array(value, out.name)
        (data / f"output_{k}.pb").write_bytes(tensor.SerializeToString())


def torch_outputs(spec: Spec) -> list[np.ndarray]:
    with torch.no_grad():
        out = spec.model(*(torch.from_numpy(v) for v in spec.inputs.values()))
    out = out if isinstance(out, (tuple, list)) else (out,)
    return [o.numpy() for o in out]


def op_counts(model: onnx.ModelProto) -> dict[str, int]:
    """Op types of the main graph and of local functions (the dynamo exporter may keep some)."""
    counts = collections.Counter()
    for node in model.graph.node:
        counts[node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}"] += 1
    for func in model.functions:
        for node in func.node:
            counts[f"{func.name}/{node.op_type}"] += 1
    return dict(sorted(counts.items()))


def check(spec: Spec, folder: Path, path: Path) -> dict:
    """Run the exported file in ORT, write the test data and return what meta.json records."""
    model = onnx.load(str(path), load_external_data=False)
    opsets = {imp.domain or "ai.onnx": imp.version for imp in model.opset_import}
    graph_inputs = [i.name for i in model.graph.input]
    missing = set(graph_inputs) - set(spec.inputs)
    if missing:
        raise RuntimeError(f"the exported graph has inputs the spec does not: {sorted(missing)}")
    # An exporter may drop an input no output depends on; ORT refuses unknown feeds.
    feeds = {name: spec.inputs[name] for name in graph_inputs}
    _, creation_s, run_s, outputs = time_ort(path, feeds)
    write_test_data(folder, model.graph, feeds, outputs)
    eager = torch_outputs(spec)
    diffs = [float(np.max(np.abs(e.astype(np.float64) - o))) if e.shape == o.shape else None
             for e, o in zip(eager, outputs)]
    return {
        "opset": opsets.get("ai.onnx"),
        "opset_imports": opsets,
        "inputs": [{"name": n, "shape": list(feeds[n].shape), "dtype": str(feeds[n].dtype)}
                   for n in graph_inputs],
        "outputs": [{"name": o.name, "shape": list(v.shape), "dtype": str(v.dtype)}
                    for o, v in zip(model.graph.output, outputs)],
        "ort_session_s": creation_s,
        "ort_run_s": run_s,
        "max_abs_diff_torch_ort": max((d for d in diffs if d is not None), default=None),
        "max_abs_diff_per_output": diffs,
        # what the difference is relative to
        "max_abs_output": max(float(np.max(np.abs(o))) for o in outputs),
        "nodes": len(model.graph.node),
        "op_counts": op_counts(model),
        "onnx_checker": checker_result(path),
        "files_bytes": {p.name: p.stat().st_size for p in sorted(folder.iterdir()) if p.is_file()},
    }


def checker_result(path: Path) -> str:
    try:
        onnx.checker.check_model(str(path), full_check=True)
        return "ok"
    except Exception as exc:  # the file still runs in ORT; record, do not fail
        return short_error(exc)


# --------------------------------------------------------------------------------------
# Driver


def export_one(name: str, exporter: str, out: Path, small: bool) -> dict:
    folder = out / f"{name}-{exporter}"
    shutil.rmtree(folder, ignore_errors=True)  # no stale files from an earlier run
    folder.mkdir(parents=True)
    row = {"model": name, "exporter": exporter, "suite": "small" if small else "full"}
    spec = build(name, small)
    row.update(architecture=spec.architecture, config=spec.config,
               parameters=sum(p.numel() for p in spec.model.parameters()))
    path = folder / "model.onnx"
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecation and tracer warnings, every model
            EXPORT[exporter](spec, path, small)
    except Exception as exc:
        row.update(status="export_failed", error=short_error(exc))
        traceback.print_exc(limit=3)
    row["export_s"] = time.perf_counter() - t0
    if "error" not in row:
        try:
            row.update(check(spec, folder, path), status="ok")
        except Exception as exc:
            row.update(status="check_failed", error=short_error(exc))
            traceback.print_exc(limit=3)
    (folder / "meta.json").write_text(json.dumps(row, indent=1) + "\n")
    return row


def versions() -> dict[str, str]:
    pkgs = ["torch", "torchvision", "timm", "transformers", "onnx", "onnxscript", "onnxruntime",
            "numpy"]
    return {p: importlib.metadata.version(p) for p in pkgs} | {"python": sys.version.split()[0]}


def print_row(r: dict) -> None:
    if r["status"] != "ok":
        print(f"{r['model']:20} {r['exporter']:11} {r['status']}: {r['error'].splitlines()[0][:150]}",
              flush=True)
        return
    print(f"{r['model']:20} {r['exporter']:11} opset {r['opset']:<3} "
          f"session {r['ort_session_s'] * 1e3:8.1f} ms  run {r['ort_run_s'] * 1e3:8.2f} ms  "
          f"|torch-ort| {r['max_abs_diff_torch_ort']:.2e} (of {r['max_abs_output']:.2e})",
          flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--small", action="store_true", help="reduced configurations (the test suite)")
    ap.add_argument("--out", type=Path, help="output folder (default: tests/onnx/real_models "
                    "with --small, else benchmarks/models/out)")
    ap.add_argument("--only", help="comma-separated model names: " + ",".join(MODELS))
    ap.add_argument("--exporters", default=",".join(EXPORTERS))
    args = ap.parse_args()
    out = args.out or (REPO / "tests/onnx/real_models" if args.small else HERE / "out")
    names = args.only.split(",") if args.only else list(MODELS)
    exporters = args.exporters.split(",")
    unknown = [n for n in names if n not in MODELS] + [e for e in exporters if e not in EXPORT]
    if unknown:
        ap.error(f"unknown model or exporter: {', '.join(unknown)}")
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(ORT_THREADS)  # eager reference on the same cores as ORT

    summary_path = out / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {"rows": []}
    rows = {(r["model"], r["exporter"]): r for r in summary["rows"]}
    for name in names:
        for exporter in exporters:
            print(f"== {name} / {exporter}", flush=True)
            row = export_one(name, exporter, out, args.small)
            rows[(name, exporter)] = row
            print_row(row)
            # rewritten after every model: a long full run killed halfway keeps its results
            order = sorted(rows, key=lambda k: (list(MODELS).index(k[0]), EXPORTERS.index(k[1])))
            summary = {"versions": versions(), "rows": [rows[k] for k in order]}
            summary_path.write_text(json.dumps(summary, indent=1) + "\n")
    print("\n".join(["", "summary:"]))
    for r in summary["rows"]:
        print_row(r)
    return 0


if __name__ == "__main__":
    sys.exit(main())

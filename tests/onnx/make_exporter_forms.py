#!/usr/bin/env python3
"""Node-level forms as PyTorch's two ONNX exporters write them, with onnxruntime's outputs.

    make_exporter_forms.py [--out tests/onnx/exporter_forms] [--only name,name]
                           [--exporters torchscript,dynamo]

Each form is a tiny torch.nn.Module that exercises one pattern the exporters produce
(open-ended slices with INT64_MAX ends, negative axes, reductions with default attributes,
attention masks, Shape/Gather/Concat chains of dynamic axes...). Each is exported with

    torchscript: torch.onnx.export(..., dynamo=False, opset_version=17)
    dynamo:      torch.onnx.export(..., dynamo=True)          (its default opset, 20)

and run with onnxruntime (CPUExecutionProvider) on fixed-seed inputs. Each pair writes

    OUT/<form>-<exporter>/model.onnx
    OUT/<form>-<exporter>/test_data_set_0/input_K.pb, output_K.pb

(ONNX's test-data layout; K in the graph's input and output order). The dynamo exports lose
their per-node metadata_props and doc strings (stack traces with the exporting machine's
paths). A pair whose export or onnxruntime run fails is skipped with the reason printed.

The gate runs them with the inputs' shapes only, as a user would:

    kiln_onnx_conformance --data tests/onnx --groups exporter_forms --shapes-only --atol 1e-5 -v
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shutil
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torch.nn.functional as F
from onnx import numpy_helper
from torch import nn

TORCHSCRIPT_OPSET = 17
EXPORTERS = ("torchscript", "dynamo")


@dataclass
class Form:
    name: str
    module: nn.Module
    inputs: dict[str, np.ndarray]
    # input name -> {axis: symbol}; inputs sharing a symbol share the dimension.
    dynamic: dict[str, dict[int, str]] = field(default_factory=dict)
    # exporters to skip, with the reason (a known exporter limitation)
    skip: dict[str, str] = field(default_factory=dict)


FORMS: list[Form] = []


def rng_for(name: str) -> np.random.Generator:
    return np.random.default_rng(abs(hash_str(name)) % (2**32))


def hash_str(s: str) -> int:
    h = 1469598103934665603
    for c in s.encode():
        h = ((h ^ c) * 1099511628211) % (2**64)
    return h


def randn(name: str, *shape: int) -> np.ndarray:
    return rng_for(name).standard_normal(shape).astype(np.float32)


def form(name: str, inputs, dynamic=None, skip=None, seed_inputs=True):
    """Decorator: registers the module class with its inputs (a dict name -> array, or a
    callable that gets a generator and returns one)."""
    def register(cls):
        torch.manual_seed(hash_str(name) % (2**31))
        module = cls()
        module.eval()
        rng = rng_for(name)
        values = inputs(rng) if callable(inputs) else inputs
        FORMS.append(Form(name, module, values, dynamic or {}, skip or {}))
        return cls
    return register


def f32(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


# --------------------------------------------------------------------------------------
# Slicing


@form("slice_open_end", lambda r: {"x": f32(r, 3, 5)})
class SliceOpenEnd(nn.Module):
    def forward(self, x):
        return x[:, 1:]


@form("slice_neg_end", lambda r: {"x": f32(r, 2, 3, 5)})
class SliceNegEnd(nn.Module):
    def forward(self, x):
        return x[..., :-1]


@form("slice_step", lambda r: {"x": f32(r, 7, 3)})
class SliceStep(nn.Module):
    def forward(self, x):
        return x[::2], x[1::3, -2:]


@form("slice_neg_start", lambda r: {"x": f32(r, 2, 6)})
class SliceNegStart(nn.Module):
    def forward(self, x):
        return x[:, -3:], x[:, -4:-1]


@form("flip_neg", lambda r: {"x": f32(r, 2, 3, 4)})
class FlipNeg(nn.Module):
    def forward(self, x):
        return torch.flip(x, [-1]), torch.flip(x, [0, -2])


@form("roll", lambda r: {"x": f32(r, 2, 5)})
class Roll(nn.Module):
    def forward(self, x):
        return torch.roll(x, shifts=2, dims=-1), torch.roll(x, shifts=-1, dims=0)


@form("narrow_select", lambda r: {"x": f32(r, 3, 4, 5)})
class NarrowSelect(nn.Module):
    def forward(self, x):
        return x.narrow(-1, 1, 3), x[:, -1], x[1]


# --------------------------------------------------------------------------------------
# Negative axes


@form("softmax_neg", lambda r: {"x": f32(r, 2, 3, 4)})
class SoftmaxNeg(nn.Module):
    def forward(self, x):
        return x.softmax(-1), F.log_softmax(x, dim=-2), x.softmax(1)


@form("mean_keepdim_neg", lambda r: {"x": f32(r, 2, 3, 4)})
class MeanKeepdimNeg(nn.Module):
    def forward(self, x):
        return x.mean(-1, keepdim=True), x.mean(-2)


@form("unsqueeze_squeeze_neg", lambda r: {"x": f32(r, 2, 1, 4)})
class UnsqueezeSqueezeNeg(nn.Module):
    def forward(self, x):
        return x.unsqueeze(-1), x.squeeze(-2), x.unsqueeze(0).squeeze(0)


@form("cat_stack_neg", lambda r: {"a": f32(r, 2, 3), "b": f32(r, 2, 4)})
class CatStackNeg(nn.Module):
    def forward(self, a, b):
        return torch.cat([a, b], dim=-1), torch.stack([a, a * 2], dim=-1)


@form("flatten_neg", lambda r: {"x": f32(r, 2, 3, 4, 2)})
class FlattenNeg(nn.Module):
    def forward(self, x):
        return x.flatten(start_dim=-2), x.flatten(1), torch.flatten(x)


@form("transpose_neg", lambda r: {"x": f32(r, 2, 3, 4)})
class TransposeNeg(nn.Module):
    def forward(self, x):
        return x.transpose(-1, -2), x.swapaxes(-3, -1)


@form("sum_multi_neg", lambda r: {"x": f32(r, 2, 3, 4)})
class SumMultiNeg(nn.Module):
    def forward(self, x):
        return x.sum(dim=(-1, -2)), x.sum(dim=(0, -1), keepdim=True)


# --------------------------------------------------------------------------------------
# Reductions


@form("reduce_all", lambda r: {"x": f32(r, 2, 3, 4)})
class ReduceAll(nn.Module):
    def forward(self, x):
        return x.sum(), x.mean(), x.max(), x.min(), x.prod()


@form("amax_amin", lambda r: {"x": f32(r, 2, 3, 4)})
class AmaxAmin(nn.Module):
    def forward(self, x):
        return x.amax(-1), x.amin(1, keepdim=True), x.amax(dim=(-1, -2))


@form("max_dim", lambda r: {"x": f32(r, 3, 5)})
class MaxDim(nn.Module):
    def forward(self, x):
        v, i = x.max(dim=-1)
        w, j = x.min(dim=0, keepdim=True)
        return v, i, w, j


@form("var_std", lambda r: {"x": f32(r, 2, 3, 5)})
class VarStd(nn.Module):
    def forward(self, x):
        return (x.var(-1), x.std(-1, unbiased=False), x.var(), x.std(dim=(0, -1), keepdim=True),
                torch.var_mean(x, dim=1)[0])


@form("logsumexp", lambda r: {"x": f32(r, 2, 3, 4)})
class LogSumExp(nn.Module):
    def forward(self, x):
        return torch.logsumexp(x, -1), torch.logsumexp(x, dim=(0, 1), keepdim=True)


@form("norm", lambda r: {"x": f32(r, 2, 3, 4)})
class Norm(nn.Module):
    def forward(self, x):
        return (x.norm(dim=-1), x.norm(p=1, dim=1, keepdim=True), torch.linalg.vector_norm(x),
                F.normalize(x, dim=-1))


@form("argmax_argmin", lambda r: {"x": f32(r, 2, 3, 4)})
class ArgmaxArgmin(nn.Module):
    def forward(self, x):
        return x.argmax(-1, keepdim=True), x.argmin(1), x.argmax()


@form("any_all", lambda r: {"x": f32(r, 3, 4)})
class AnyAll(nn.Module):
    def forward(self, x):
        m = x > 0.5
        return m.any(-1), m.all(0), (x != 0).sum(-1)


# --------------------------------------------------------------------------------------
# Attention masks


def attn_inputs(r, b=2, h=2, t=4):
    mask = np.ones((b, t), dtype=np.int64)
    mask[0, -1] = 0
    mask[1, -2:] = 0
    return {"scores": f32(r, b, h, t, t), "mask": mask}


@form("masked_fill_inf", attn_inputs)
class MaskedFillInf(nn.Module):
    def forward(self, scores, mask):
        m = mask[:, None, None, :] == 0
        return scores.masked_fill(m, float("-inf")).softmax(-1)


@form("masked_fill_finfo_min", attn_inputs)
class MaskedFillFinfoMin(nn.Module):
    def forward(self, scores, mask):
        m = (1.0 - mask[:, None, None, :].to(scores.dtype)) * torch.finfo(scores.dtype).min
        return (scores + m).softmax(-1), scores.masked_fill(mask[:, None, None, :] == 0,
                                                            torch.finfo(torch.float32).min)


@form("where_mask", attn_inputs)
class WhereMask(nn.Module):
    def forward(self, scores, mask):
        m = mask.bool()[:, None, None, :]
        return torch.where(m, scores, torch.tensor(torch.finfo(torch.float32).min)).softmax(-1)


def sdpa_inputs(r, b=2, h=2, t=4, d=8):
    mask = np.ones((b, 1, t, t), dtype=bool)
    mask[0, 0, :, -1] = False
    mask[1, 0, 2:, 0] = False
    return {"q": f32(r, b, h, t, d), "k": f32(r, b, h, t, d), "v": f32(r, b, h, t, d),
            "mask": mask}


@form("sdpa_bool_mask", sdpa_inputs)
class SdpaBoolMask(nn.Module):
    def forward(self, q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


@form("sdpa_float_mask", lambda r: {**{k: v for k, v in sdpa_inputs(r).items() if k != "mask"},
                                    "bias": f32(r, 2, 1, 1, 4)})
class SdpaFloatMask(nn.Module):
    def forward(self, q, k, v, bias):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)


@form("sdpa_causal", lambda r: {k: v for k, v in sdpa_inputs(r).items() if k != "mask"})
class SdpaCausal(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


@form("sdpa_scale", lambda r: {k: v for k, v in sdpa_inputs(r).items() if k != "mask"})
class SdpaScale(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, scale=0.5)


@form("causal_mask_arange", lambda r: {"scores": f32(r, 2, 2, 5, 5)})
class CausalMaskArange(nn.Module):
    def forward(self, scores):
        t = scores.shape[-1]
        i = torch.arange(t)
        causal = i[:, None] >= i[None, :]
        return scores.masked_fill(~causal, float("-inf")).softmax(-1)


@form("tril_triu", lambda r: {"x": f32(r, 2, 4, 5)})
class TrilTriu(nn.Module):
    def forward(self, x):
        ones = torch.ones(4, 4)
        return torch.tril(x), torch.triu(x, diagonal=1), torch.tril(ones, -1), torch.triu(x, -1)


# --------------------------------------------------------------------------------------
# Indexing


@form("embedding_padding", lambda r: {"ids": np.array([[1, 0, 3, 9], [2, 2, 0, 5]], np.int64)})
class EmbeddingPadding(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4, padding_idx=0)

    def forward(self, ids):
        return self.emb(ids)


@form("index_select", lambda r: {"x": f32(r, 3, 5), "idx": np.array([4, 0, 2, 2], np.int64),
                                  "rows": np.array([2, 0], np.int64)})
class IndexSelect(nn.Module):
    def forward(self, x, idx, rows):
        return x.index_select(1, idx), x.index_select(0, rows), x[rows], x[:, idx], x[rows, idx[:2]]


@form("gather_neg", lambda r: {"x": f32(r, 2, 3, 5),
                               "idx": r.integers(0, 5, (2, 3, 2)).astype(np.int64)})
class GatherNeg(nn.Module):
    def forward(self, x, idx):
        return torch.gather(x, -1, idx), torch.gather(x, -2, idx[:, :2] % 3)


@form("scatter", lambda r: {"x": f32(r, 2, 5), "idx": np.array([[0, 3], [4, 1]], np.int64),
                            "src": f32(r, 2, 2)})
class Scatter(nn.Module):
    def forward(self, x, idx, src):
        return x.scatter(-1, idx, src), x.scatter_add(1, idx, src), x.scatter(1, idx, 0.5)


@form("index_put", lambda r: {"x": f32(r, 5, 3), "idx": np.array([3, 0], np.int64),
                              "v": f32(r, 2, 3)})
class IndexPut(nn.Module):
    def forward(self, x, idx, v):
        y = x.clone()
        y[idx] = v
        z = x.clone()
        z[:, 1] = 0.0
        w = x.clone()
        w[1:3] = v
        return y, z, w


@form("index_put_bool", lambda r: {"x": f32(r, 3, 4)})
class IndexPutBool(nn.Module):
    def forward(self, x):
        y = x.clone()
        y[y < 0] = 0.0
        return y


@form("one_hot", lambda r: {"ids": np.array([[0, 3], [2, 1]], np.int64)})
class OneHot(nn.Module):
    def forward(self, ids):
        return F.one_hot(ids, 4)


# --------------------------------------------------------------------------------------
# Movement


@form("expand_repeat", lambda r: {"x": f32(r, 2, 1, 3)})
class ExpandRepeat(nn.Module):
    def forward(self, x):
        return (x.expand(2, 4, 3), x.expand(-1, 2, -1), x.repeat(1, 2, 2),
                x.repeat_interleave(2, dim=-1), x.repeat_interleave(3, dim=0))


@form("repeat_interleave_tensor", lambda r: {"x": f32(r, 3, 2)})
class RepeatInterleaveTensor(nn.Module):
    def forward(self, x):
        return x.repeat_interleave(torch.tensor([1, 2, 3]), dim=0)


@form("split_uneven", lambda r: {"x": f32(r, 2, 7)})
class SplitUneven(nn.Module):
    def forward(self, x):
        a = torch.split(x, 3, dim=-1)
        b = x.chunk(3, dim=1)
        c = torch.split(x, [2, 5], dim=1)
        return (*a, *b, *c)


@form("unbind", lambda r: {"x": f32(r, 3, 2)})
class Unbind(nn.Module):
    def forward(self, x):
        return x.unbind(0)


@form("view_reshape", lambda r: {"x": f32(r, 2, 3, 4)})
class ViewReshape(nn.Module):
    def forward(self, x):
        return x.view(-1, 4), x.reshape(2, -1), x.reshape(x.shape[0], 2, -1), x.view(6, 2, 2)


@form("permute_contiguous", lambda r: {"x": f32(r, 2, 3, 4)})
class PermuteContiguous(nn.Module):
    def forward(self, x):
        return x.permute(2, 0, 1).contiguous(), x.permute(0, 2, 1).reshape(2, -1), x.movedim(2, 0)


@form("pixel_shuffle", lambda r: {"x": f32(r, 1, 8, 2, 3)})
class PixelShuffle(nn.Module):
    def forward(self, x):
        return F.pixel_shuffle(x, 2), F.pixel_unshuffle(F.pixel_shuffle(x, 2), 2)


# --------------------------------------------------------------------------------------
# Elementwise


@form("clamp_one_side", lambda r: {"x": f32(r, 3, 4)})
class ClampOneSide(nn.Module):
    def forward(self, x):
        return x.clamp(min=0.1), x.clamp(max=0.2), x.clamp(-0.5, 0.5), F.relu6(x), F.hardtanh(x)


@form("clamp_tensor", lambda r: {"x": f32(r, 3, 4), "lo": f32(r, 4), "hi": f32(r, 4) + 1})
class ClampTensor(nn.Module):
    def forward(self, x, lo, hi):
        return torch.clamp(x, min=lo), torch.clamp(x, lo, hi), torch.minimum(x, hi), torch.maximum(x, lo)


@form("int_division", lambda r: {"a": np.array([7, -7, 7, -7, 0, 9, -9, 5], np.int64),
                                 "b": np.array([2, 2, -2, -2, 3, -4, 4, 5], np.int64)})
class IntDivision(nn.Module):
    def forward(self, a, b):
        return (a // b, torch.floor_divide(a, b), torch.remainder(a, b), a % 3,
                torch.div(a, b, rounding_mode="trunc"), torch.fmod(a, b), a / b)


@form("float_division", lambda r: {"a": f32(r, 8) * 4, "b": f32(r, 8)})
class FloatDivision(nn.Module):
    def forward(self, a, b):
        return (a // b, torch.remainder(a, b), torch.fmod(a, b),
                torch.div(a, b, rounding_mode="trunc"), torch.div(a, b, rounding_mode="floor"))


@form("pow_scalars", lambda r: {"x": np.abs(f32(r, 3, 4)) + 0.1})
class PowScalars(nn.Module):
    def forward(self, x):
        return x ** 2, x ** 0.5, x ** -1, torch.pow(x, 3), 2 ** x, x.square(), x.sqrt()


@form("rsqrt", lambda r: {"x": np.abs(f32(r, 3, 4)) + 0.1})
class Rsqrt(nn.Module):
    def forward(self, x):
        return torch.rsqrt(x), x.reciprocal()


@form("gelu_exact", lambda r: {"x": f32(r, 3, 8, scale=2)})
class GeluExact(nn.Module):
    def forward(self, x):
        return F.gelu(x)


@form("gelu_tanh", lambda r: {"x": f32(r, 3, 8, scale=2)})
class GeluTanh(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.GELU(approximate="tanh")

    def forward(self, x):
        return self.act(x)


@form("silu_hardswish", lambda r: {"x": f32(r, 3, 8, scale=3)})
class SiluHardswish(nn.Module):
    def forward(self, x):
        return F.silu(x), F.hardswish(x), F.hardsigmoid(x)


@form("mish", lambda r: {"x": f32(r, 3, 8, scale=3)})
class Mish(nn.Module):
    def forward(self, x):
        return F.mish(x)


@form("activations", lambda r: {"x": f32(r, 3, 8, scale=3)})
class Activations(nn.Module):
    def forward(self, x):
        return (F.leaky_relu(x, 0.1), F.elu(x), F.softplus(x, beta=2.0), F.softplus(x), F.selu(x),
                torch.sigmoid(x), torch.tanh(x), torch.erf(x), F.logsigmoid(x), F.celu(x, 0.5))


@form("prelu", lambda r: {"x": f32(r, 2, 3, 4)})
class PRelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.PReLU(3, init=0.2)
        with torch.no_grad():
            self.act.weight.copy_(torch.tensor([0.1, 0.2, 0.3]))

    def forward(self, x):
        return self.act(x)


@form("where_scalar", lambda r: {"x": f32(r, 3, 4)})
class WhereScalar(nn.Module):
    def forward(self, x):
        return (torch.where(x > 0, x, 0.0), torch.where(x > 0, 1.0, -1.0),
                torch.where(x < 0, 0.0, x * 2))


@form("nan_inf", lambda r: {"x": np.array([1.0, np.nan, np.inf, -np.inf, -2.0, 0.0], np.float32)})
class NanInf(nn.Module):
    def forward(self, x):
        return torch.isnan(x), torch.isinf(x), torch.nan_to_num(x), torch.isfinite(x)


@form("logical", lambda r: {"x": f32(r, 3, 4), "y": f32(r, 3, 4)})
class Logical(nn.Module):
    def forward(self, x, y):
        a, b = x > 0, y < 0
        return a & b, a | b, a ^ b, ~a, torch.logical_not(a), x.eq(y), x >= y, x != y


# --------------------------------------------------------------------------------------
# Normalizations


@form("layer_norm", lambda r: {"x": f32(r, 2, 3, 8)})
class LayerNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.affine = nn.LayerNorm(8)
        self.two = nn.LayerNorm([3, 8])
        with torch.no_grad():
            for ln in (self.affine, self.two):
                ln.weight.normal_()
                ln.bias.normal_()

    def forward(self, x):
        return self.affine(x), F.layer_norm(x, (8,)), self.two(x)


@form("group_norm", lambda r: {"x": f32(r, 2, 6, 3, 3)})
class GroupNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.gn = nn.GroupNorm(3, 6)
        with torch.no_grad():
            self.gn.weight.normal_()
            self.gn.bias.normal_()

    def forward(self, x):
        return self.gn(x), F.group_norm(x, 2)


@form("batch_norm_eval", lambda r: {"x": f32(r, 2, 3, 4, 4), "y": f32(r, 2, 3, 5)})
class BatchNormEval(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn2 = nn.BatchNorm2d(3)
        self.bn1 = nn.BatchNorm1d(3)
        with torch.no_grad():
            for bn in (self.bn2, self.bn1):
                bn.weight.normal_()
                bn.bias.normal_()
                bn.running_mean.normal_()
                bn.running_var.uniform_(0.5, 2.0)

    def forward(self, x, y):
        return self.bn2(x), self.bn1(y)


@form("instance_norm", lambda r: {"x": f32(r, 2, 3, 4, 4)})
class InstanceNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.InstanceNorm2d(3, affine=True)
        with torch.no_grad():
            self.norm.weight.normal_()
            self.norm.bias.normal_()

    def forward(self, x):
        return self.norm(x)


@form("rms_norm", lambda r: {"x": f32(r, 2, 3, 8)})
class RmsNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(8))

    def forward(self, x):
        return F.rms_norm(x, (8,), self.weight, eps=1e-6), F.rms_norm(x, (3, 8))


@form("rms_norm_manual", lambda r: {"x": f32(r, 2, 3, 8)})
class RmsNormManual(nn.Module):
    """LLaMA's hand-written form: pow(2).mean(-1, keepdim) and rsqrt."""
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(8))

    def forward(self, x):
        var = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(var + 1e-6))


# --------------------------------------------------------------------------------------
# Resampling, pooling, convolution


@form("interp_nearest", lambda r: {"x": f32(r, 1, 2, 3, 4)})
class InterpNearest(nn.Module):
    def forward(self, x):
        return (F.interpolate(x, scale_factor=2, mode="nearest"),
                F.interpolate(x, size=(5, 7), mode="nearest"))


@form("interp_bilinear_ac_true", lambda r: {"x": f32(r, 1, 2, 3, 4)})
class InterpBilinearAcTrue(nn.Module):
    def forward(self, x):
        return (F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True),
                F.interpolate(x, size=(5, 6), mode="bilinear", align_corners=True))


@form("interp_bilinear_ac_false", lambda r: {"x": f32(r, 1, 2, 3, 4)})
class InterpBilinearAcFalse(nn.Module):
    def forward(self, x):
        return (F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False),
                F.interpolate(x, size=(5, 6), mode="bilinear", align_corners=False))


@form("interp_1d_bicubic", lambda r: {"x": f32(r, 1, 2, 5), "y": f32(r, 1, 1, 4, 4)})
class Interp1dBicubic(nn.Module):
    def forward(self, x, y):
        return (F.interpolate(x, scale_factor=2, mode="linear"),
                F.interpolate(y, scale_factor=2, mode="bicubic", align_corners=False),
                F.upsample_nearest(y, scale_factor=3))


@form("avg_pool", lambda r: {"x": f32(r, 1, 2, 5, 5)})
class AvgPool(nn.Module):
    def forward(self, x):
        return (F.avg_pool2d(x, 3, 2, padding=1, count_include_pad=False),
                F.avg_pool2d(x, 2, 2, ceil_mode=True),
                F.avg_pool2d(x, 3, 2, padding=1, ceil_mode=True, count_include_pad=True),
                F.avg_pool2d(x, 2))


@form("max_pool", lambda r: {"x": f32(r, 1, 2, 5, 5)})
class MaxPool(nn.Module):
    def forward(self, x):
        return (F.max_pool2d(x, 3, 2, padding=1), F.max_pool2d(x, 2, ceil_mode=True),
                F.max_pool2d(x, 3, 1, padding=1, dilation=1), F.max_pool1d(x[0], 2))


@form("max_pool_indices", lambda r: {"x": f32(r, 1, 2, 4, 4)})
class MaxPoolIndices(nn.Module):
    def forward(self, x):
        return F.max_pool2d(x, 2, return_indices=True)


@form("adaptive_pool", lambda r: {"x": f32(r, 2, 3, 4, 6)})
class AdaptivePool(nn.Module):
    def forward(self, x):
        return (F.adaptive_avg_pool2d(x, 1), F.adaptive_avg_pool2d(x, (2, 3)),
                F.adaptive_max_pool2d(x, 1), x.mean((-2, -1)))


@form("conv1d_same", lambda r: {"x": f32(r, 1, 4, 9)})
class Conv1dSame(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Conv1d(4, 6, 3, padding="same")
        self.b = nn.Conv1d(4, 4, 4, padding="same", groups=4)
        self.c = nn.Conv1d(4, 2, 3, stride=2, bias=False)
        self.d = nn.Conv1d(4, 2, 3, padding=2, dilation=2)

    def forward(self, x):
        return self.a(x), self.b(x), self.c(x), self.d(x)


@form("conv2d_groups_dilation", lambda r: {"x": f32(r, 1, 4, 7, 6)})
class Conv2dGroupsDilation(nn.Module):
    def __init__(self):
        super().__init__()
        self.same = nn.Conv2d(4, 6, (3, 2), padding="same", groups=2)
        self.dilated = nn.Conv2d(4, 6, 3, padding=(2, 1), groups=2, dilation=(2, 1))
        self.strided = nn.Conv2d(4, 4, (3, 2), stride=(2, 1), padding=(1, 0), groups=4)
        self.pw = nn.Conv2d(4, 3, 1)
        self.reflect = nn.Conv2d(4, 2, 3, padding=1, padding_mode="reflect")

    def forward(self, x):
        return self.same(x), self.dilated(x), self.strided(x), self.pw(x), self.reflect(x)


# The TorchScript exporter writes padding="same" with a dilation as auto_pad=SAME_UPPER and
# dilations, which onnxruntime refuses ("Dilation not supported for AutoPadType::SAME_UPPER"):
# only the dynamo export (explicit pads) has a reference.
@form("conv_same_dilation", lambda r: {"x": f32(r, 1, 4, 9, 7)},
      skip={"torchscript": "onnxruntime refuses auto_pad SAME_UPPER with dilations"})
class ConvSameDilation(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(4, 4, 3, padding="same", groups=2, dilation=2)
        self.b = nn.Conv1d(4, 4, 4, padding="same", groups=4, dilation=2)

    def forward(self, x):
        return self.a(x), self.b(x[..., 0])


@form("conv_transpose2d", lambda r: {"x": f32(r, 1, 4, 3, 3)})
class ConvTranspose2d(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1, output_padding=1)
        self.b = nn.ConvTranspose2d(4, 4, 2, stride=2, groups=2)
        self.c = nn.ConvTranspose1d(4, 3, 3, stride=3, padding=1, output_padding=2, dilation=2)

    def forward(self, x):
        return self.a(x), self.b(x), self.c(x[..., 0])


@form("pad_modes", lambda r: {"x": f32(r, 1, 2, 3, 4)})
class PadModes(nn.Module):
    def forward(self, x):
        return (F.pad(x, (1, 2)), F.pad(x, (1, 0, 2, 1), value=-1.5),
                F.pad(x, (2, 1, 1, 2), mode="reflect"), F.pad(x, (1, 2, 0, 1), mode="replicate"),
                F.pad(x, (0, 0, -1, 1)), F.pad(x, (1, 1, 1, 1), mode="circular"))


@form("pad_1d_3d", lambda r: {"x": f32(r, 1, 2, 5), "y": f32(r, 1, 1, 2, 3, 3)})
class Pad1d3d(nn.Module):
    def forward(self, x, y):
        return (F.pad(x, (2, 1), mode="reflect"), F.pad(x, (3, 0), mode="replicate"),
                F.pad(y, (1, 1, 1, 0, 0, 1), mode="replicate"))


@form("unfold_fold", lambda r: {"x": f32(r, 1, 2, 4, 5)})
class UnfoldFold(nn.Module):
    def forward(self, x):
        return F.unfold(x, 2, stride=1), x.unfold(-1, 2, 2)


# --------------------------------------------------------------------------------------
# Scans, top-k, casts, constants


@form("cumsum", lambda r: {"x": f32(r, 2, 5), "i": r.integers(-3, 4, (2, 5)).astype(np.int64)})
class CumSum(nn.Module):
    def forward(self, x, i):
        return x.cumsum(-1), x.cumsum(0), i.cumsum(1), torch.cumsum(x.flip(-1), -1).flip(-1)


@form("topk", lambda r: {"x": f32(r, 3, 6)})
class TopK(nn.Module):
    def forward(self, x):
        v, i = x.topk(3, dim=-1)
        w, j = x.topk(2, dim=0, largest=False)
        return v, i, w, j


@form("casts", lambda r: {"x": f32(r, 3, 4, scale=4), "i": r.integers(-5, 6, (3, 4)).astype(np.int64)})
class Casts(nn.Module):
    def forward(self, x, i):
        return (i.float(), x.long(), x.int(), (x > 0).float(), (i > 0).to(torch.int64),
                x.to(torch.float64), x.half().float(), i.to(torch.int32), x.bool(),
                x.round(), x.floor().long(), x.ceil().int())


@form("arange_float", lambda r: {"x": f32(r, 6)})
class ArangeFloat(nn.Module):
    def forward(self, x):
        return (x + torch.arange(0.0, 3.0, 0.5), torch.arange(6) * x, torch.arange(1, 12, 2),
                torch.linspace(0, 1, 6) + x)


@form("like_ops", lambda r: {"x": f32(r, 2, 3), "i": r.integers(0, 5, (3,)).astype(np.int64)})
class LikeOps(nn.Module):
    def forward(self, x, i):
        return (torch.full_like(x, 2.5), torch.ones_like(x), torch.zeros_like(i),
                torch.full_like(i, 7), x.new_zeros(4, 2), x.new_ones(x.shape), torch.zeros(x.shape[1]),
                torch.full((2, 2), -1.0), torch.empty_like(x).fill_(3.0))


# --------------------------------------------------------------------------------------
# Products


@form("einsum", lambda r: {"q": f32(r, 2, 2, 3, 4), "k": f32(r, 2, 2, 5, 4), "a": f32(r, 3, 3)})
class Einsum(nn.Module):
    def forward(self, q, k, a):
        return (torch.einsum("bhqd,bhkd->bhqk", q, k), torch.einsum("ii->i", a),
                torch.einsum("ij->", a), torch.einsum("bhqd,bhqd->bhq", q, q))


@form("matmul_broadcast", lambda r: {"a": f32(r, 2, 1, 3, 4), "b": f32(r, 4, 5), "c": f32(r, 3, 4, 2),
                                     "v": f32(r, 4)})
class MatmulBroadcast(nn.Module):
    def forward(self, a, b, c, v):
        return a @ b, a @ c, a @ v, v @ b, torch.bmm(c.transpose(1, 2), c)


@form("linear_3d", lambda r: {"x": f32(r, 2, 3, 4), "y": f32(r, 3, 4)})
class Linear3d(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 5)
        self.b = nn.Linear(4, 2, bias=False)

    def forward(self, x, y):
        return self.a(x), self.b(x), self.a(y)


@form("baddbmm_addmm", lambda r: {"m": f32(r, 3, 5), "a": f32(r, 3, 4), "b": f32(r, 4, 5),
                                  "bm": f32(r, 2, 3, 5), "ba": f32(r, 2, 3, 4), "bb": f32(r, 2, 4, 5)})
class BaddbmmAddmm(nn.Module):
    def forward(self, m, a, b, bm, ba, bb):
        return (torch.addmm(m, a, b, beta=0.5, alpha=2.0), torch.addmm(m, a, b),
                torch.baddbmm(bm, ba, bb, beta=0.0, alpha=0.125), torch.baddbmm(bm, ba, bb, beta=2.0),
                torch.addmm(m[0], a, b))


# --------------------------------------------------------------------------------------
# Dynamic axes: Shape/Gather/Concat chains feeding Reshape, Expand, Slice, Range...


@form("dyn_reshape_heads", lambda r: {"x": f32(r, 2, 3, 8)}, dynamic={"x": {0: "batch", 1: "seq"}})
class DynReshapeHeads(nn.Module):
    def forward(self, x):
        b, t, c = x.shape
        h = x.view(b, t, 2, c // 2).transpose(1, 2)
        return h.softmax(-1).transpose(1, 2).reshape(b, t, -1), x.reshape(b * t, c)


@form("dyn_expand", lambda r: {"x": f32(r, 2, 1, 4), "y": f32(r, 2, 3, 4)},
      dynamic={"x": {0: "batch"}, "y": {0: "batch", 1: "seq"}})
class DynExpand(nn.Module):
    def forward(self, x, y):
        return x.expand(-1, y.shape[1], -1) * y, x.expand_as(y), torch.zeros_like(y[..., 0])


@form("dyn_causal_mask", lambda r: {"scores": f32(r, 2, 2, 5, 5)},
      dynamic={"scores": {0: "batch", 2: "seq", 3: "seq"}})
class DynCausalMask(nn.Module):
    def forward(self, scores):
        t = scores.shape[-1]
        mask = torch.full((t, t), float("-inf")).triu(1)
        i = torch.arange(t)
        causal = i[None, :] <= i[:, None]
        return (scores + mask).softmax(-1), scores.masked_fill(~causal, -1e9)


@form("dyn_attention_mask", attn_inputs, dynamic={"scores": {0: "batch", 2: "seq", 3: "seq"},
                                                 "mask": {0: "batch", 1: "seq"}})
class DynAttentionMask(nn.Module):
    def forward(self, scores, mask):
        b, t = mask.shape
        ext = mask[:, None, None, :].expand(b, 1, t, t).to(scores.dtype)
        ext = (1.0 - ext) * torch.finfo(torch.float32).min
        return (scores + ext).softmax(-1)


@form("dyn_slice", lambda r: {"x": f32(r, 2, 6)}, dynamic={"x": {0: "batch", 1: "seq"}})
class DynSlice(nn.Module):
    def forward(self, x):
        n = x.shape[1]
        return x[:, : n // 2], x[:, n // 2:], x[:, 1:] - x[:, :-1]


@form("dyn_sdpa_causal", lambda r: {k: v for k, v in sdpa_inputs(r).items() if k != "mask"},
      dynamic={"q": {0: "batch", 2: "seq"}, "k": {0: "batch", 2: "seq"}, "v": {0: "batch", 2: "seq"}})
class DynSdpaCausal(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


@form("dyn_positions", lambda r: {"ids": r.integers(0, 10, (2, 5)).astype(np.int64)},
      dynamic={"ids": {0: "batch", 1: "seq"}})
class DynPositions(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(10, 4)
        self.pos = nn.Embedding(8, 4)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1], dtype=torch.long).unsqueeze(0).expand_as(ids)
        return self.tok(ids) + self.pos(pos)


@form("dyn_flatten_mean", lambda r: {"x": f32(r, 2, 3, 4, 4)}, dynamic={"x": {0: "batch"}})
class DynFlattenMean(nn.Module):
    def forward(self, x):
        return x.flatten(1), x.view(x.size(0), -1).mean(-1), x.mean((2, 3), keepdim=True)


@form("dyn_interpolate", lambda r: {"x": f32(r, 2, 2, 3, 4)}, dynamic={"x": {0: "batch"}})
class DynInterpolate(nn.Module):
    def forward(self, x):
        return F.interpolate(x, scale_factor=2, mode="nearest")


@form("dyn_split_cat", lambda r: {"x": f32(r, 2, 4, 6)}, dynamic={"x": {0: "batch", 1: "seq"}})
class DynSplitCat(nn.Module):
    def forward(self, x):
        a, b = x.chunk(2, dim=-1)
        return torch.cat([-b, a], dim=-1), torch.cat([x, x[:, :1]], dim=1)


@form("dyn_rotary", lambda r: {"x": f32(r, 2, 2, 5, 4)}, dynamic={"x": {0: "batch", 2: "seq"}})
class DynRotary(nn.Module):
    """LLaMA's rotary embedding: positions from arange(seq), cos/sin, rotate_half."""
    def forward(self, x):
        t = x.shape[2]
        inv = 1.0 / (10000 ** (torch.arange(0, 4, 2, dtype=torch.float32) / 4))
        freqs = torch.arange(t, dtype=torch.float32)[:, None] * inv[None, :]
        emb = torch.cat([freqs, freqs], dim=-1)
        x1, x2 = x[..., :2], x[..., 2:]
        rot = torch.cat([-x2, x1], dim=-1)
        return x * emb.cos() + rot * emb.sin()


# --------------------------------------------------------------------------------------
# More forms: dtypes, losses, recurrences, sampling, odd indexing


def half_inputs(r):
    return {"x": f32(r, 2, 3, 8).astype(np.float16), "w": f32(r, 8, 4).astype(np.float16)}


# float16 models, one ONNX op per float16 result: onnxruntime's CPU kernels lack most float16
# ops, so it inserts casts to float32 around them and then drops the f32 -> f16 -> f32 pairs
# between neighbours, computing a chain of float16 ops in float32 with one rounding at the
# end. ONNX (its reference evaluator, and PyTorch eagerly) round after every op, so a chain
# (x * x - 0.5; the TorchScript exporter's Div/Erf/Add/Mul GELU) has no onnxruntime reference
# that holds to 1e-3: those are left out.
@form("half_elementwise", half_inputs)
class HalfElementwise(nn.Module):
    def forward(self, x, w):
        return x + 1, x * x, x @ w, x.sum(-1), x.float().softmax(-1).half(), x.amax(-1)


@form("half_softmax", lambda r: {"x": f32(r, 4, 32).astype(np.float16)})
class HalfSoftmax(nn.Module):
    def forward(self, x):
        return x.softmax(-1), F.log_softmax(x, -1)


@form("half_layer_norm", half_inputs)
class HalfLayerNorm(nn.Module):
    def forward(self, x, w):
        return F.layer_norm(x, (8,))


@form("half_gelu", half_inputs,
      skip={"torchscript": "its GELU is a chain of float16 ops (Div, Erf, Add, Mul, Mul) that "
                           "onnxruntime computes in float32 (see above)"})
class HalfGelu(nn.Module):
    def forward(self, x, w):
        return F.gelu(x)


@form("int_reductions", lambda r: {"i": r.integers(-9, 10, (3, 4)).astype(np.int64),
                                   "j": r.integers(-3, 4, (3, 4)).astype(np.int32)})
class IntReductions(nn.Module):
    def forward(self, i, j):
        return (i.sum(-1), i.max(), i.amin(1), i.prod(0), j.sum(0), i.clamp(min=-2, max=5),
                torch.maximum(i, j.long()), i.abs(), (-i).argmax(-1), j * 3 + 1, j.float().mean())


@form("uint8_image", lambda r: {"img": r.integers(0, 256, (1, 3, 4, 4)).astype(np.uint8)})
class Uint8Image(nn.Module):
    def forward(self, img):
        mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
        std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
        return (img.float() / 255 - mean) / std, img // 16, (img > 128).to(torch.uint8)


@form("int32_indices", lambda r: {"x": f32(r, 5, 3), "ids": np.array([[4, 0], [1, 1]], np.int32)})
class Int32Indices(nn.Module):
    def forward(self, x, ids):
        return F.embedding(ids, x), x.index_select(0, ids[0]), x[ids.long()]


@form("scalar_input", lambda r: {"x": f32(r, 2, 3), "s": np.array(0.5, np.float32),
                                 "n": np.array(2, np.int64)})
class ScalarInput(nn.Module):
    def forward(self, x, s, n):
        return x * s, x.sum() * s, x * n, s + n, s.reshape(1)


@form("none_indexing", lambda r: {"x": f32(r, 2, 3)})
class NoneIndexing(nn.Module):
    def forward(self, x):
        return x[:, None], x[..., None], x[None, :, None], x[:, None, 1:], x[1, None]


@form("masked_fill_tensor", lambda r: {"x": f32(r, 3, 4), "m": r.random((3, 4)) > 0.5,
                                       "v": np.array(-2.0, np.float32)})
class MaskedFillTensor(nn.Module):
    def forward(self, x, m, v):
        return x.masked_fill(m, v), x.masked_fill(m[0], 0.0), torch.where(m, x, v), m.float() * x


@form("sort_argsort", lambda r: {"x": f32(r, 3, 6)})
class SortArgsort(nn.Module):
    def forward(self, x):
        v, i = x.sort(-1)
        w, j = x.sort(0, descending=True)
        return v, i, w, j, x.argsort(-1)


@form("cross_entropy", lambda r: {"logits": f32(r, 4, 5), "target": np.array([1, 0, -100, 4], np.int64)})
class CrossEntropy(nn.Module):
    def forward(self, logits, target):
        return (F.cross_entropy(logits, target), F.cross_entropy(logits, target, reduction="none"),
                F.nll_loss(F.log_softmax(logits, -1), target.clamp(min=0), reduction="sum"))


@form("cross_entropy_smoothing", lambda r: {"logits": f32(r, 4, 5), "target": np.array([1, 0, 3, 4], np.int64)})
class CrossEntropySmoothing(nn.Module):
    def forward(self, logits, target):
        return F.cross_entropy(logits, target, label_smoothing=0.1)


@form("simple_losses", lambda r: {"a": f32(r, 3, 4), "b": f32(r, 3, 4)})
class SimpleLosses(nn.Module):
    def forward(self, a, b):
        return (F.mse_loss(a, b), F.smooth_l1_loss(a, b),
                F.binary_cross_entropy_with_logits(a, (b > 0).float()), F.cosine_similarity(a, b, dim=-1))


@form("lstm_batch_first", lambda r: {"x": f32(r, 2, 5, 3)}, dynamic={"x": {0: "batch"}})
class LstmBatchFirst(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(3, 4, batch_first=True, bidirectional=True)

    def forward(self, x):
        y, (h, c) = self.lstm(x)
        return y, h, c


@form("gru", lambda r: {"x": f32(r, 5, 2, 3), "h0": f32(r, 2, 2, 4)})
class Gru(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(3, 4, num_layers=2)

    def forward(self, x, h0):
        return self.gru(x, h0)


@form("grid_sample", lambda r: {"x": f32(r, 1, 2, 4, 5), "grid": (r.random((1, 3, 3, 2)) * 2.4 - 1.2).astype(np.float32)})
class GridSample(nn.Module):
    def forward(self, x, grid):
        return (F.grid_sample(x, grid, align_corners=False),
                F.grid_sample(x, grid, mode="nearest", padding_mode="border", align_corners=True))


@form("affine_grid", lambda r: {"theta": (np.eye(2, 3)[None] + r.standard_normal((2, 2, 3)) * 0.1).astype(np.float32)})
class AffineGrid(nn.Module):
    def forward(self, theta):
        return F.affine_grid(theta, [2, 1, 3, 4], align_corners=False)


@form("trig_misc", lambda r: {"x": (r.random((3, 4)) * 1.8 - 0.9).astype(np.float32), "y": f32(r, 3, 4)})
class TrigMisc(nn.Module):
    def forward(self, x, y):
        return (x.sin(), x.cos(), x.asin(), x.atan(), torch.atan2(x, y), x.sign(),
                torch.log1p(x.abs()), torch.expm1(x), x.log2().nan_to_num(0.0), torch.logit(x.abs(), 1e-3))


@form("glu_shrink", lambda r: {"x": f32(r, 3, 8)})
class GluShrink(nn.Module):
    def forward(self, x):
        return F.glu(x, -1), F.hardshrink(x, 0.3), F.softshrink(x, 0.3), F.tanhshrink(x), F.softsign(x)


@form("diff", lambda r: {"x": f32(r, 3, 5)})
class Diff(nn.Module):
    def forward(self, x):
        return torch.diff(x, dim=-1), torch.diff(x, dim=0)


@form("logcumsumexp", lambda r: {"x": f32(r, 3, 5)})
class Logcumsumexp(nn.Module):
    def forward(self, x):
        return torch.logcumsumexp(x, -1), torch.logcumsumexp(x, 0)


@form("std_mean_aminmax", lambda r: {"x": f32(r, 3, 5)})
class StdMeanAminmax(nn.Module):
    def forward(self, x):
        s, m = torch.std_mean(x, -1)
        lo, hi = torch.aminmax(x, dim=0)
        return s, m, lo, hi


@form("bitwise", lambda r: {"i": r.integers(0, 64, (6,)).astype(np.int64), "j": r.integers(0, 4, (6,)).astype(np.int64)})
class Bitwise(nn.Module):
    def forward(self, i, j):
        return i & j, i | j, i ^ j, ~i


@form("bitwise_shift", lambda r: {"i": r.integers(0, 64, (6,)).astype(np.int64), "j": r.integers(0, 4, (6,)).astype(np.int64)})
class BitwiseShift(nn.Module):
    def forward(self, i, j):
        return i << j, i >> j, i >> 1


@form("einsum_more", lambda r: {"a": f32(r, 2, 3, 4), "b": f32(r, 2, 4, 5), "u": f32(r, 3), "v": f32(r, 4)})
class EinsumMore(nn.Module):
    def forward(self, a, b, u, v):
        return (torch.einsum("bij,bjk->bik", a, b), torch.einsum("i,j->ij", u, v),
                torch.einsum("bij->bji", a), torch.einsum("...j,j->...", a, v), torch.outer(u, v))


@form("bilinear", lambda r: {"a": f32(r, 2, 3), "b": f32(r, 2, 4)})
class Bilinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.bl = nn.Bilinear(3, 4, 5)

    def forward(self, a, b):
        return self.bl(a, b)


@form("embedding_bag", lambda r: {"ids": np.array([[1, 2, 4], [4, 3, 0]], np.int64)})
class EmbeddingBag(nn.Module):
    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(6, 3, mode="mean")

    def forward(self, ids):
        return self.bag(ids)


@form("conv3d_pool3d", lambda r: {"x": f32(r, 1, 2, 4, 4, 4), "y": f32(r, 1, 2, 7)})
class Conv3dPool3d(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(2, 2, 3, padding=1)

    def forward(self, x, y):
        return (self.conv(x), F.max_pool3d(x, 2), F.avg_pool3d(x, 2, ceil_mode=True),
                F.avg_pool1d(y, 3, 2, padding=1, count_include_pad=False), F.max_pool1d(y, 3, 2, ceil_mode=True))


@form("multihead_attention", lambda r: {"x": f32(r, 2, 4, 8), "pad": np.array([[False] * 4, [False, False, True, True]])})
class MultiheadAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(8, 2, batch_first=True)

    def forward(self, x, pad):
        y, w = self.mha(x, x, x, key_padding_mask=pad)
        return y, w


@form("transformer_layer", lambda r: {"x": f32(r, 2, 4, 8)})
class TransformerLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, norm_first=True)

    def forward(self, x):
        mask = nn.Transformer.generate_square_subsequent_mask(4)
        return self.layer(x, src_mask=mask, is_causal=True)


@form("dyn_interpolate_size_like", lambda r: {"x": f32(r, 2, 2, 3, 4), "y": f32(r, 2, 1, 6, 7)},
      dynamic={"x": {0: "batch", 2: "h", 3: "w"}, "y": {0: "batch", 2: "h2", 3: "w2"}})
class DynInterpolateSizeLike(nn.Module):
    def forward(self, x, y):
        return (F.interpolate(x, size=y.shape[-2:], mode="bilinear", align_corners=False),
                F.interpolate(x, size=y.shape[2:], mode="nearest"))


@form("dyn_zeros_positions", lambda r: {"x": f32(r, 2, 5, 3)}, dynamic={"x": {0: "batch", 1: "seq"}})
class DynZerosPositions(nn.Module):
    def forward(self, x):
        b, t, _ = x.shape
        pos = torch.ones(b, t, dtype=torch.long).cumsum(-1) - 1
        return (torch.zeros(b, 3), x.new_full((b, t), 2.0), pos, x.new_zeros(x.shape[:-1]),
                torch.arange(t, dtype=torch.float32) / t)


@form("dyn_repeat_tile", lambda r: {"x": f32(r, 2, 3)}, dynamic={"x": {0: "batch", 1: "seq"}})
class DynRepeatTile(nn.Module):
    def forward(self, x):
        return x.repeat(2, 1), x.unsqueeze(1).repeat(1, 3, 1), x.repeat_interleave(2, dim=1), x.view(-1)


@form("dyn_pad_to_multiple", lambda r: {"x": f32(r, 2, 5, 3)}, dynamic={"x": {0: "batch", 1: "seq"}})
class DynPadToMultiple(nn.Module):
    def forward(self, x):
        t = x.shape[1]
        extra = (4 - t % 4) % 4
        return F.pad(x, (0, 0, 0, extra)), F.pad(x, (1, 1))


@form("dyn_sdpa_mask", lambda r: {**{k: v for k, v in sdpa_inputs(r).items() if k != "mask"},
                                  "mask": attn_inputs(r)["mask"]},
      dynamic={"q": {0: "batch", 2: "seq"}, "k": {0: "batch", 2: "seq"}, "v": {0: "batch", 2: "seq"},
               "mask": {0: "batch", 1: "seq"}})
class DynSdpaMask(nn.Module):
    def forward(self, q, k, v, mask):
        m = mask[:, None, None, :].bool()
        scale = q.size(-1) ** -0.5
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m), F.scaled_dot_product_attention(q, k, v, scale=scale)


@form("dyn_lstm_state", lambda r: {"x": f32(r, 2, 5, 3)}, dynamic={"x": {0: "batch"}})
class DynLstmState(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(3, 4, batch_first=True)

    def forward(self, x):
        h0 = torch.zeros(1, x.size(0), 4)
        y, _ = self.lstm(x, (h0, h0))
        return y[:, -1]



# --------------------------------------------------------------------------------------
# Exporting


def trace_inputs(f: Form) -> tuple[torch.Tensor, ...]:
    return tuple(torch.from_numpy(v.copy()) for v in f.inputs.values())


def export_torchscript(f: Form, path: Path) -> None:
    axes = {name: {ax: sym for ax, sym in d.items()} for name, d in f.dynamic.items()}
    torch.onnx.export(f.module, trace_inputs(f), str(path), dynamo=False,
                      opset_version=TORCHSCRIPT_OPSET, input_names=list(f.inputs),
                      dynamic_axes=axes or None)


def export_dynamo(f: Form, path: Path) -> None:
    dims = {sym: torch.export.Dim(sym) for d in f.dynamic.values() for sym in d.values()}
    shapes = None
    if f.dynamic:
        shapes = tuple({ax: dims[sym] for ax, sym in f.dynamic.get(name, {}).items()} or None
                       for name in f.inputs)
    program = torch.onnx.export(f.module, trace_inputs(f), dynamo=True, dynamic_shapes=shapes,
                                input_names=list(f.inputs))
    model = program.model_proto
    strip(model)
    onnx.save(model, str(path))


def strip(model: onnx.ModelProto) -> None:
    """Per-node metadata_props (stack traces, FX names) and doc strings, from every graph."""
    def graph(g: onnx.GraphProto) -> None:
        g.doc_string = ""
        for n in g.node:
            del n.metadata_props[:]
            n.doc_string = ""
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    graph(a.g)
                for sub in a.graphs:
                    graph(sub)
        for vi in list(g.input) + list(g.output) + list(g.value_info):
            vi.doc_string = ""
            del vi.metadata_props[:]
        for init in g.initializer:
            init.doc_string = ""
            del init.metadata_props[:]
    model.doc_string = ""
    del model.metadata_props[:]
    graph(model.graph)
    for fn in model.functions:
        for n in fn.node:
            del n.metadata_props[:]
            n.doc_string = ""


EXPORT = {"torchscript": export_torchscript, "dynamo": export_dynamo}


@contextlib.contextmanager
def quiet():
    """Silences stdout and stderr down to the file descriptors (the exporters print graphs
    and progress from C++ and Python)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 1)
        os.dup2(null.fileno(), 2)
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def short_error(exc: BaseException) -> str:
    message = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    _, found, summary = message.partition("## Exception summary")
    lines = [l for l in (summary if found else message).strip().splitlines() if l.strip()]
    return f"{type(exc).__name__}: " + " | ".join(lines[:4])[:600]


def write_test_data(folder: Path, model: onnx.ModelProto, inputs: dict, outputs: list) -> None:
    data = folder / "test_data_set_0"
    data.mkdir()
    for k, inp in enumerate(model.graph.input):
        tensor = numpy_helper.from_array(inputs[inp.name], inp.name)
        (data / f"input_{k}.pb").write_bytes(tensor.SerializeToString())
    for k, (out, value) in enumerate(zip(model.graph.output, outputs)):
        tensor = numpy_helper.from_array(np.asarray(value), out.name)
        (data / f"output_{k}.pb").write_bytes(tensor.SerializeToString())


def make(f: Form, exporter: str, out: Path) -> str | None:
    """Exports, runs and writes one pair; the reason when it is skipped."""
    if exporter in f.skip:
        return f.skip[exporter]
    folder = out / f"{f.name}-{exporter}"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    path = folder / "model.onnx"
    try:
        with warnings.catch_warnings(), quiet():
            warnings.simplefilter("ignore")
            EXPORT[exporter](f, path)
    except Exception as exc:  # noqa: BLE001 - any exporter failure skips the pair
        shutil.rmtree(folder)
        return "export failed: " + short_error(exc)
    model = onnx.load(str(path))
    names = [i.name for i in model.graph.input]
    missing = [n for n in names if n not in f.inputs]
    if missing:
        shutil.rmtree(folder)
        return f"graph inputs {missing} are not the module's"
    feeds = {n: f.inputs[n] for n in names}
    try:
        sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        outputs = sess.run(None, feeds)
    except Exception as exc:  # noqa: BLE001
        shutil.rmtree(folder)
        return "onnxruntime failed: " + short_error(exc)
    # onnxruntime against PyTorch: a form whose export is wrong is not a kiln test.
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = f.module(*trace_inputs(f))
    want = want if isinstance(want, (tuple, list)) else (want,)
    if len(want) == len(outputs):
        for k, (w, g) in enumerate(zip(want, outputs)):
            w = w.numpy()
            if w.shape != g.shape or not np.allclose(w.astype(np.float64), g.astype(np.float64),
                                                     rtol=1e-4, atol=1e-5, equal_nan=True):
                print(f"  note: {f.name}-{exporter} output {k}: onnxruntime differs from PyTorch "
                      f"({w.shape} {w.dtype} vs {g.shape} {g.dtype})")
    write_test_data(folder, model, f.inputs, outputs)
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "exporter_forms")
    parser.add_argument("--only", default="")
    parser.add_argument("--exporters", default=",".join(EXPORTERS))
    args = parser.parse_args()
    only = {s for s in args.only.split(",") if s}
    exporters = [e for e in args.exporters.split(",") if e]
    torch.manual_seed(0)
    args.out.mkdir(parents=True, exist_ok=True)
    written, skipped = 0, 0
    for f in FORMS:
        if only and f.name not in only:
            continue
        for exporter in exporters:
            reason = make(f, exporter, args.out)
            if reason is None:
                written += 1
                print(f"{f.name}-{exporter}: ok", flush=True)
            else:
                skipped += 1
                print(f"{f.name}-{exporter}: skipped: {reason}", flush=True)
    print(f"{written} written, {skipped} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())

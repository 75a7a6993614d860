"""CUDA parity cases: each is a small model (built with dinoml where the compiler runs) and its
PyTorch oracle (evaluated on the GPU machine in float64 on CUDA). Importable without dinoml:
`build` functions import it lazily, so the GPU machine only needs torch.

A case groups several ops of one family and dtype into one model with many outputs (one nvcc
compile each), evaluated at every listed dim assignment, with fresh random inputs each time.
"""
from __future__ import annotations

import math

DT = ("float32", "float16", "bfloat16")
# (max |out - ref| / max(1, max |ref|), ||out - ref|| / ||ref||) limits per dtype. float32 is
# compiled with --no-tf32 (exact fp32 GEMMs): the issue's 1e-4.
TOL = {"float32": (1e-4, 1e-5), "float16": (1e-2, 5e-3), "bfloat16": (5e-2, 2e-2)}


class Case:
    def __init__(self, name, dtype, inputs, weights, dims, grid, build, ref, tol=None, tf32=False):
        self.name, self.dtype = name, dtype
        self.inputs = inputs      # name -> shape (ints and dim names)
        self.weights = weights    # name -> (shape, kind: "w" (1/sqrt(fan_in)) | "one" (1 + noise) | "small")
        self.dims = dims          # name -> (min, max, buckets)
        self.grid = grid          # list of {dim: value}
        self.build = build        # build(ops, W, X) -> {output name: tensor}   (dinoml side)
        self.ref = ref            # ref(torch, W, X) -> {output name: tensor} (float64 CUDA)
        self.tol = tol or TOL[dtype]
        self.tf32 = tf32

    @property
    def key(self):
        return f"{self.name}_{self.dtype}"


# ---- GEMM family ---------------------------------------------------------------------------

def _gemm_build(ops, W, X):
    x, d = X["x"], X["d"]
    w, b, w2 = W["w"], W["b"], W["w2"]
    return {
        "rcr": ops.gemm_rcr(x, w), "bias": ops.gemm_rcr_bias(x, w, b),
        "relu": ops.gemm_rcr_bias_relu(x, w, b), "gelu": ops.gemm_rcr_bias_gelu(x, w, b),
        "fast_gelu": ops.gemm_rcr_bias_fast_gelu(x, w, b), "swish": ops.gemm_rcr_bias_swish(x, w, b),
        "sigmoid": ops.gemm_rcr_bias_sigmoid(x, w, b), "tanh": ops.gemm_rcr_bias_tanh(x, w, b),
        "add": ops.gemm_rcr_bias_add(x, w, b, d), "add_relu": ops.gemm_rcr_bias_add_relu(x, w, b, d),
        "rrr": ops.gemm_rrr(x, w2), "rrr_bias": ops.gemm_rrr_bias(x, w2, b),
    }


def _gemm_ref(torch, W, X):
    F = torch.nn.functional
    x, d, w, b, w2 = X["x"], X["d"], W["w"], W["b"], W["w2"]
    lin = F.linear(x, w, b)
    return {"rcr": F.linear(x, w), "bias": lin, "relu": torch.relu(lin), "gelu": F.gelu(lin),
            "fast_gelu": F.gelu(lin, approximate="tanh"), "swish": F.silu(lin), "sigmoid": torch.sigmoid(lin),
            "tanh": torch.tanh(lin), "add": lin + d, "add_relu": torch.relu(lin + d), "rrr": x @ w2, "rrr_bias": x @ w2 + b}


# GEMMs sized for the own sm_90a kernel (prepare.py also compiles them with DINOML_CUDA_GEMM=wgmma,
# and these and the "gemm" case with DINOML_CUDA_GEMM=skinny: the small-M kernel at M = 1..700):
# K = 520 (8 full K steps of 64 and a zero-filled tail), N = 300 (column tail, N % 8 != 0: scalar
# stores) and N = 256 (16-byte stores), M from 1 to 700 (row tails, several 128-row tiles).
def _gemm_wg_build(ops, W, X):
    x, d = X["x"], X["d"]
    return {"rcr": ops.gemm_rcr(x, W["w"]), "swish": ops.gemm_rcr_bias_swish(x, W["w"], W["b"]),
            "gelu": ops.gemm_rcr_bias_gelu(x, W["w3"], W["b3"]),
            "add_relu": ops.gemm_rcr_bias_add_relu(x, W["w3"], W["b3"], d)}


def _gemm_wg_ref(torch, W, X):
    F = torch.nn.functional
    x, d = X["x"], X["d"]
    return {"rcr": F.linear(x, W["w"]), "swish": F.silu(F.linear(x, W["w"], W["b"])),
            "gelu": F.gelu(F.linear(x, W["w3"], W["b3"])), "add_relu": torch.relu(F.linear(x, W["w3"], W["b3"]) + d)}


# ---- batched matmul and softmax ----------------------------------------------------------------

def _bmm_build(ops, W, X):
    q, k, v = X["q"], X["k"], X["v"]
    s = ops.bmm_rcr(q, k)
    p = ops.softmax(s * 0.17677669529663687, axis=-1)
    return {"scores": s, "probs": p, "attn": ops.bmm_rrr(p, v), "softmax_axis1": ops.softmax(q, axis=1),
            "log_softmax": ops.log_softmax(s, axis=-1),
            "bcast_head": ops.bmm_rrr(q, W["wh"]),   # [b,4,s,32] x [1,4,32,16]: partial broadcast
            "bcast_all": ops.bmm_rrr(q, W["wa"])}    # [b,4,s,32] x [1,1,32,8]: operand broadcast whole


def _bmm_ref(torch, W, X):
    q, k, v = X["q"], X["k"], X["v"]
    s = q @ k.transpose(-1, -2)
    p = torch.softmax(s * 0.17677669529663687, dim=-1)
    return {"scores": s, "probs": p, "attn": p @ v, "softmax_axis1": torch.softmax(q, dim=1),
            "log_softmax": torch.log_softmax(s, dim=-1), "bcast_head": q @ W["wh"], "bcast_all": q @ W["wa"]}


# ---- norms and reductions ------------------------------------------------------------------------

def _norm_build(ops, W, X):
    x, x3 = X["x"], X["x3"]
    return {"layer_norm": ops.layer_norm(x, W["g"], W["b"], eps=1e-5),
            "rms_norm": ops.rms_norm(x, W["g"], eps=1e-6),
            "sum_last": ops.reduce_sum(x, axes=[-1]), "mean_first": ops.reduce_mean(x, axes=[0]),
            "max_last": ops.reduce_max(x, axes=[-1]), "min_all": ops.reduce_min(x3),
            "sum_middle": ops.reduce_sum(x3, axes=[1]), "mean_02": ops.reduce_mean(x3, axes=[0, 2])}


def _norm_ref(torch, W, X):
    F = torch.nn.functional
    x, x3 = X["x"], X["x3"]
    rms = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * W["g"]
    return {"layer_norm": F.layer_norm(x, (x.shape[-1],), W["g"], W["b"], 1e-5), "rms_norm": rms,
            "sum_last": x.sum(-1), "mean_first": x.mean(0), "max_last": x.amax(-1), "min_all": x3.amin(),
            "sum_middle": x3.sum(1), "mean_02": x3.mean((0, 2))}


# Wide rows: the register-held row kernels of norm.cu (cols a multiple of 8, >= 256; softmax above
# 1024) and the 8-wide generated elementwise kernels (flat inputs; xo's odd element count leaves a
# tail, its ragged rows send layer_norm to the loop kernel).
def _wide_build(ops, W, X):
    x, xo = X["x"], X["xo"]
    return {"layer_norm": ops.layer_norm(x, W["g"], W["b"], eps=1e-5), "layer_norm_plain": ops.layer_norm(x, eps=1e-5),
            "rms_norm": ops.rms_norm(x, W["g"], eps=1e-6), "softmax": ops.softmax(x * 3.0, axis=-1),
            "log_softmax": ops.log_softmax(x, axis=-1), "layer_norm_ragged": ops.layer_norm(xo, eps=1e-5),
            "gelu_tail": ops.gelu(xo) + xo * 0.5}


def _wide_ref(torch, W, X):
    F = torch.nn.functional
    x, xo = X["x"], X["xo"]
    return {"layer_norm": F.layer_norm(x, (x.shape[-1],), W["g"], W["b"], 1e-5),
            "layer_norm_plain": F.layer_norm(x, (x.shape[-1],), None, None, 1e-5),
            "rms_norm": x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * W["g"],
            "softmax": torch.softmax(x * 3.0, -1), "log_softmax": torch.log_softmax(x, -1),
            "layer_norm_ragged": F.layer_norm(xo, (xo.shape[-1],), None, None, 1e-5), "gelu_tail": F.gelu(xo) + xo * 0.5}


# ---- group_norm and pad (x[n, 32, 9, 11]: 8 groups of 4 channels; a 5-d input for group_norm) ----

def _gn_pad_build(ops, W, X):
    x, v = X["x"], X["v"]
    return {"group_norm": ops.group_norm(x, 8, W["g"], W["b"], eps=1e-5),
            "group_norm_plain": ops.group_norm(x, num_groups=4, eps=1e-6),
            "group_norm_5d": ops.group_norm(v, 2, W["g6"], W["b6"], eps=1e-5),
            "pad_constant": ops.pad(x, [0, 1, 2, 3, 0, 2, 1, 0], mode="constant", value=0.5),
            "pad_reflect": ops.pad(x, [0, 0, 3, 2, 0, 0, 1, 4], mode="reflect"),
            "pad_edge": ops.pad(x, [0, 0, 1, 5, 0, 0, 2, 3], mode="edge")}


def _gn_pad_ref(torch, W, X):
    F = torch.nn.functional
    x, v = X["x"], X["v"]
    return {"group_norm": F.group_norm(x, 8, W["g"], W["b"], 1e-5), "group_norm_plain": F.group_norm(x, 4, eps=1e-6),
            "group_norm_5d": F.group_norm(v, 2, W["g6"], W["b6"], 1e-5),
            # torch pads from the last axis backwards: (W begin, W end, H begin, H end, C begin, C end)
            "pad_constant": F.pad(x, (3, 0, 2, 1, 1, 2), mode="constant", value=0.5),
            "pad_reflect": F.pad(x, (2, 4, 3, 1), mode="reflect"),
            "pad_edge": F.pad(x, (5, 3, 1, 2), mode="replicate")}


# ---- data movement ------------------------------------------------------------------------------

def _move_build(ops, W, X):
    x = X["x"]
    a, b = ops.split(x, [2, 4], axis=1)
    return {"permute": ops.permute(x, dims=[2, 0, 1]), "transpose": ops.transpose(x, dim0=1, dim1=2),
            "permute_keep_last": ops.permute(x, dims=[1, 0, 2]),
            "concat": ops.concatenate([x, x * 2.0], axis=1), "split_a": a, "split_b": b,
            "slice": ops.slice(x, starts=[1, 0], ends=[5, 10], axes=[1, 2], steps=[2, 3]),
            "expand": ops.expand(X["e"], shape=[X["x"].shape[0], 6, 10]),
            "reshape_permute": ops.permute(ops.reshape(x, [X["x"].shape[0], 3, 2, 10]), dims=[0, 2, 3, 1])}


def _move_ref(torch, W, X):
    x = X["x"]
    B = x.shape[0]
    return {"permute": x.permute(2, 0, 1), "transpose": x.transpose(1, 2), "permute_keep_last": x.permute(1, 0, 2),
            "concat": torch.cat([x, x * 2.0], 1),
            "split_a": x[:, :2], "split_b": x[:, 2:], "slice": x[:, 1:5:2, 0:10:3],
            "expand": X["e"].expand(B, 6, 10), "reshape_permute": x.reshape(B, 3, 2, 10).permute(0, 2, 3, 1)}


# ---- fused elementwise ------------------------------------------------------------------------

def _ew_build(ops, W, X):
    x, y, z = X["x"], X["y"], X["z"]
    t = x * y + z                     # broadcast [b,32] * [32] + [b,1]
    return {"gelu_chain": ops.gelu(t) * 0.5 - ops.tanh(x),
            "sigmoid_div": ops.sigmoid(t) / (ops.abs(z) + 1.0),
            "where": ops.where(x > 0.0, x, z * 0.5),
            "clamp_exp_log": ops.log(ops.exp(ops.clamp(t, min=-3.0, max=3.0)) + 1.0),
            "max_min": ops.max(x, y) - ops.min(x, z),
            "silu_sqrt": ops.silu(x) + ops.sqrt(ops.abs(x))}


def _ew_ref(torch, W, X):
    x, y, z = X["x"], X["y"], X["z"]
    t = x * y + z
    F = torch.nn.functional
    return {"gelu_chain": F.gelu(t) * 0.5 - torch.tanh(x), "sigmoid_div": torch.sigmoid(t) / (z.abs() + 1.0),
            "where": torch.where(x > 0, x, z * 0.5), "clamp_exp_log": torch.log(torch.exp(t.clamp(-3, 3)) + 1.0),
            "max_min": torch.maximum(x, y) - torch.minimum(x, z), "silu_sqrt": F.silu(x) + x.abs().sqrt()}


# ---- transformer block (d=768, 12 heads, ff 2048: the benchmark's model) and the MLP example -----

D_MODEL, HEADS, FF = 768, 12, 2048  # FF: PyTorch's default dim_feedforward


def transformer_module(dml, dtype):
    return dml.nn.TransformerEncoderLayer(D_MODEL, HEADS, dim_feedforward=FF, activation="gelu", layer_norm_eps=1e-5,
                                          batch_first=True, norm_first=False, dtype=dtype)


def transformer_torch(torch, W, dtype):
    m = torch.nn.TransformerEncoderLayer(D_MODEL, HEADS, dim_feedforward=FF, dropout=0.0, activation="gelu",
                                         layer_norm_eps=1e-5, batch_first=True, norm_first=False)
    m.load_state_dict({k: v for k, v in W.items()})
    return m.to(device="cuda", dtype=dtype).eval()


def _tb_ref(torch, W, X):
    m = transformer_torch(torch, W, torch.float64)
    # The oracle is the plain float64 composition, not the fused inference fast path.
    fast = getattr(torch.backends.mha, "get_fastpath_enabled", lambda: None)()
    if fast is not None:
        torch.backends.mha.set_fastpath_enabled(False)
    try:
        with torch.no_grad():
            return {"output": m(X["x"])}
    finally:
        if fast is not None:
            torch.backends.mha.set_fastpath_enabled(fast)


MLP_IN, MLP_HID, MLP_OUT = 32, 64, 16


def mlp_module(dml, dtype):
    return dml.nn.Sequential(dml.nn.Linear(MLP_IN, MLP_HID, dtype=dtype), dml.nn.GELU(), dml.nn.Linear(MLP_HID, MLP_OUT, dtype=dtype))


def _mlp_ref(torch, W, X):
    F = torch.nn.functional
    return {"output": F.linear(F.gelu(F.linear(X["x"], W["0.weight"], W["0.bias"])), W["2.weight"], W["2.bias"])}


def tb_weights():
    w = {"self_attn.in_proj_weight": ([3 * D_MODEL, D_MODEL], "w"), "self_attn.in_proj_bias": ([3 * D_MODEL], "small"),
         "self_attn.out_proj.weight": ([D_MODEL, D_MODEL], "w"), "self_attn.out_proj.bias": ([D_MODEL], "small"),
         "linear1.weight": ([FF, D_MODEL], "w"), "linear1.bias": ([FF], "small"),
         "linear2.weight": ([D_MODEL, FF], "w"), "linear2.bias": ([D_MODEL], "small"),
         "norm1.weight": ([D_MODEL], "one"), "norm1.bias": ([D_MODEL], "small"),
         "norm2.weight": ([D_MODEL], "one"), "norm2.bias": ([D_MODEL], "small")}
    return w



# ---- convolution, pooling, resampling (issue 4: conv / pool ops on CUDA) -----------------------

def _conv_build(ops, W, X):
    x, r = X["x"], X["r"]
    c3 = ops.conv2d(x, W["w3"], padding=1)
    return {
        "conv3x3": c3,
        "conv_bias_relu": ops.relu(ops.conv2d(x, W["w3"], W["b32"], padding=1)),
        "conv_bias_add_relu": ops.relu(ops.conv2d(x, W["w3"], W["b32"], padding=1) + r),
        "conv_s2_d2_pad": ops.conv2d(x, W["w3"], W["b32"], stride=2, padding=(2, 1, 1, 2), dilation=2),
        "conv_groups2": ops.conv2d(x, W["wg"], W["b32"], stride=(1, 2), padding=1, groups=2),
        "depthwise": ops.relu(ops.conv2d(x, W["wdw"], W["b16"], padding=1, groups=16)),
        "conv1x1_s2": ops.conv2d(x, W["w1"], stride=2),
        # plain 1x1 convs: one batched GEMM on NCHW (DML_CUDA_CONV_GEMM); H·W = 195 (scalar epilogue)
        # and 360 (vector epilogue), no bias / bias + ReLU / bias + residual + ReLU, C = 3 (odd rows)
        "conv1x1": ops.conv2d(x, W["w1"]),
        "conv1x1_bias_relu": ops.relu(ops.conv2d(x, W["w1"], W["b24"])),
        "conv1x1_add_relu": ops.relu(ops.conv2d(x, W["w1b"], W["b32"]) + r),
        "conv1x1_c3": ops.relu(ops.conv2d(X["img"], W["w1i"], W["b8"])),
        "stem7x7_s2": ops.conv2d(X["img"], W["w7"], W["b16"], stride=2, padding=3),
        "maxpool3_s2_p1": ops.max_pool2d(x, 3, stride=2, padding=1),
        "maxpool2_dil2": ops.max_pool2d(x, 2, stride=1, dilation=2),
        "avgpool3_s2_p1": ops.avg_pool2d(x, 3, stride=2, padding=1),
        "avgpool3_nopad_count": ops.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False),
        "global_avg": ops.global_avg_pool2d(x),
        "nearest_x2": ops.interpolate(x, scale_factor=2, mode="nearest"),
        "nearest_size": ops.interpolate(x, size=(7, 30), mode="nearest"),
        "bilinear_x2": ops.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False),
        "bilinear_size_ac": ops.interpolate(x, size=(9, 25), mode="bilinear", align_corners=True),
        "batch_norm": ops.batch_norm(x, W["bn_mean"], W["bn_var"], W["bn_g"], W["bn_b"], eps=1e-5),
    }


def _conv_ref(torch, W, X):
    F = torch.nn.functional
    x, r = X["x"], X["r"]
    c = F.conv2d(x, W["w3"], W["b32"], padding=1)
    return {
        "conv3x3": F.conv2d(x, W["w3"], padding=1), "conv_bias_relu": torch.relu(c),
        "conv_bias_add_relu": torch.relu(c + r),
        "conv_s2_d2_pad": F.conv2d(F.pad(x, (1, 2, 2, 1)), W["w3"], W["b32"], stride=2, dilation=2),
        "conv_groups2": F.conv2d(x, W["wg"], W["b32"], stride=(1, 2), padding=1, groups=2),
        "depthwise": torch.relu(F.conv2d(x, W["wdw"], W["b16"], padding=1, groups=16)),
        "conv1x1_s2": F.conv2d(x, W["w1"], stride=2),
        "conv1x1": F.conv2d(x, W["w1"]),
        "conv1x1_bias_relu": torch.relu(F.conv2d(x, W["w1"], W["b24"])),
        "conv1x1_add_relu": torch.relu(F.conv2d(x, W["w1b"], W["b32"]) + r),
        "conv1x1_c3": torch.relu(F.conv2d(X["img"], W["w1i"], W["b8"])),
        "stem7x7_s2": F.conv2d(X["img"], W["w7"], W["b16"], stride=2, padding=3),
        "maxpool3_s2_p1": F.max_pool2d(x, 3, stride=2, padding=1),
        "maxpool2_dil2": F.max_pool2d(x, 2, stride=1, dilation=2),
        "avgpool3_s2_p1": F.avg_pool2d(x, 3, stride=2, padding=1),
        "avgpool3_nopad_count": F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False),
        "global_avg": x.mean((2, 3), keepdim=True),
        "nearest_x2": F.interpolate(x, scale_factor=2, mode="nearest"),
        "nearest_size": F.interpolate(x, size=(7, 30), mode="nearest"),
        "bilinear_x2": F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False),
        "bilinear_size_ac": F.interpolate(x, size=(9, 25), mode="bilinear", align_corners=True),
        "batch_norm": F.batch_norm(x, W["bn_mean"], W["bn_var"], W["bn_g"], W["bn_b"], False, 0.0, 1e-5),
    }


def conv_weights():
    return {"w3": ([32, 16, 3, 3], "conv"), "b32": ([32], "small"), "wg": ([32, 8, 3, 3], "conv"),
            "wdw": ([16, 1, 3, 3], "conv"), "b16": ([16], "small"), "w1": ([24, 16, 1, 1], "conv"),
            "b24": ([24], "small"), "w1b": ([32, 16, 1, 1], "conv"), "w1i": ([8, 3, 1, 1], "conv"), "b8": ([8], "small"),
            "w7": ([16, 3, 7, 7], "conv"), "bn_mean": ([16], "small"), "bn_var": ([16], "one"),
            "bn_g": ([16], "one"), "bn_b": ([16], "small")}


# Convolution beyond 2-d and symbolic spatial extents: 1-d convs / pools (conv2d and the 2-d pools
# on a unit height), conv3d (kernels/cuda/conv3d.cu), separable 3-d pools, and a conv / pool /
# resize / reshape chain on an image whose H and W are dims with buckets.
def conv_nd_weights():
    return {"w1": ([12, 8, 5], "conv"), "b12": ([12], "small"), "w1dw": ([8, 1, 3], "conv"),
            "w3": ([10, 6, 3, 3, 3], "conv"), "b10": ([10], "small"), "w3g": ([8, 3, 1, 3, 2], "conv"),
            "ws": ([16, 16, 3, 3], "conv"), "b16": ([16], "small")}


def _conv_nd_build(ops, W, X):
    a, v, s = X["a"], X["v"], X["s"]
    y = ops.relu(ops.conv2d(s, W["ws"], W["b16"], stride=2, padding=1))
    y = ops.max_pool2d(y, 3, stride=2, padding=1)
    y = ops.interpolate(y, scale_factor=2, mode="nearest")
    n, c = y.shape[0], y.shape[1]
    return {
        "conv1d_s2_p": ops.conv1d(a, W["w1"], W["b12"], stride=2, padding=(3, 1)),
        "conv1d_dw_dil": ops.conv1d(a, W["w1dw"], None, padding=2, dilation=2, groups=8),
        "maxpool1d": ops.max_pool1d(a, 3, stride=2, padding=1, ceil_mode=True),
        "avgpool1d": ops.avg_pool1d(a, 4, stride=3, padding=2, count_include_pad=False),
        "conv3d": ops.conv3d(v, W["w3"], W["b10"], stride=(1, 2, 2), padding=(1, 1, 0, 0, 1, 2)),
        "conv3d_g2_dil": ops.conv3d(v, W["w3g"], None, padding=1, dilation=(1, 2, 1), groups=2),
        "maxpool3d": ops.max_pool3d(v, (2, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1)),
        "avgpool3d": ops.avg_pool3d(v, 2, stride=2, ceil_mode=True, count_include_pad=False),
        "sym_chain": y,
        "sym_flat": ops.reshape(y, [n, c, -1]),
    }


def _conv_nd_ref(torch, W, X):
    F = torch.nn.functional
    a, v, s = X["a"], X["v"], X["s"]
    y = F.max_pool2d(torch.relu(F.conv2d(s, W["ws"], W["b16"], stride=2, padding=1)), 3, stride=2, padding=1)
    y = F.interpolate(y, scale_factor=2, mode="nearest")
    return {
        "conv1d_s2_p": F.conv1d(F.pad(a, (3, 1)), W["w1"], W["b12"], stride=2),
        "conv1d_dw_dil": F.conv1d(a, W["w1dw"], None, padding=2, dilation=2, groups=8),
        "maxpool1d": F.max_pool1d(a, 3, stride=2, padding=1, ceil_mode=True),
        "avgpool1d": F.avg_pool1d(a, 4, stride=3, padding=2, count_include_pad=False),
        "conv3d": F.conv3d(F.pad(v, (0, 2, 1, 1, 1, 0)), W["w3"], W["b10"], stride=(1, 2, 2)),
        "conv3d_g2_dil": F.conv3d(v, W["w3g"], None, padding=1, dilation=(1, 2, 1), groups=2),
        "maxpool3d": F.max_pool3d(v, (2, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1)),
        "avgpool3d": F.avg_pool3d(v, 2, stride=2, ceil_mode=True, count_include_pad=False),
        "sym_chain": y,
        "sym_flat": y.reshape(y.shape[0], y.shape[1], -1),
    }


# Channels-last conv chains (kernels/cuda/conv_nhwc.cu through the lowering's NHWC plan): odd
# shapes inside a chain whose intermediate tensors stay NHWC; the outputs are NCHW again.
def conv_nhwc_weights():
    return {"wa": ([40, 24, 3, 3], "conv"), "ba": ([40], "small"), "wb": ([40, 40, 1, 1], "conv"), "bb": ([40], "small"),
            "wc": ([72, 40, 3, 3], "conv"), "bc": ([72], "small"), "wd": ([66, 72, 1, 1], "conv"), "bd": ([66], "small"),
            "we": ([64, 72, 3, 3], "conv"), "ws": ([16, 3, 7, 7], "conv"), "bs": ([16], "small"),
            "wt": ([24, 16, 1, 1], "conv"), "bt": ([24], "small")}


def _conv_nhwc_build(ops, W, X):
    x, img = X["x"], X["img"]
    a = ops.relu(ops.conv2d(x, W["wa"], W["ba"], stride=2, padding=1))            # C 24 -> 40, stride 2
    b = ops.relu(ops.conv2d(a, W["wb"], W["bb"]) + a)                              # 1x1 + residual (NHWC)
    c = ops.relu(ops.conv2d(b, W["wc"], W["bc"], padding=(2, 1, 1, 2), dilation=2))  # asymmetric pads, dilation
    mp = ops.max_pool2d(c, 3, stride=2, padding=1)                                 # NHWC pool
    s = ops.relu(ops.conv2d(img, W["ws"], W["bs"], stride=2, padding=3))            # C=3 stem from NCHW
    return {
        "d_1x1_s2_O66": ops.conv2d(mp, W["wd"], W["bd"], stride=2),                # O % 8 != 0, NCHW output
        "gap": ops.global_avg_pool2d(ops.relu(ops.conv2d(mp, W["we"], padding=1))),  # no bias, NHWC gap
        "stem_1x1": ops.relu(ops.conv2d(s, W["wt"], W["bt"])),
    }


def _conv_nhwc_ref(torch, W, X):
    F = torch.nn.functional
    x, img = X["x"], X["img"]
    a = torch.relu(F.conv2d(x, W["wa"], W["ba"], stride=2, padding=1))
    b = torch.relu(F.conv2d(a, W["wb"], W["bb"]) + a)
    c = torch.relu(F.conv2d(F.pad(b, (1, 2, 2, 1)), W["wc"], W["bc"], dilation=2))
    mp = F.max_pool2d(c, 3, stride=2, padding=1)
    s = torch.relu(F.conv2d(img, W["ws"], W["bs"], stride=2, padding=3))
    return {"d_1x1_s2_O66": F.conv2d(mp, W["wd"], W["bd"], stride=2),
            "gap": torch.relu(F.conv2d(mp, W["we"], padding=1)).mean((2, 3), keepdim=True),
            "stem_1x1": torch.relu(F.conv2d(s, W["wt"], W["bt"]))}


# ---- fused attention (scaled_dot_product_attention) ---------------------------------------------

def _sdpa_build(ops, W, X):
    q, k, v, m = X["q"], X["k"], X["v"], X["m"]
    sdpa = ops.scaled_dot_product_attention
    return {
        "plain": sdpa(q, k, v),
        "causal": sdpa(q, k, v, causal=True),
        "scaled": sdpa(q, k, v, scale=0.3),
        "bool_mask": sdpa(q, k, v, m > -1.5),                 # [b,1,s,s] broadcast over heads
        "additive_mask": sdpa(q, k, v, m * 2.0),
        "causal_hd128": sdpa(X["q2"], X["k2"], X["v2"], causal=True),
        "hd128": sdpa(X["q2"], X["k2"], X["v2"]),
        "cross_kv": sdpa(q, X["kc"], X["vc"]),                 # Lq != Lk
        "cross_causal": sdpa(q, X["kc"], X["vc"], causal=True),
        "hd40_dv24": sdpa(X["q3"], X["k3"], X["v3"], causal=True),  # generic (SIMT) kernel
        # Few query rows over all s keys (a decode step): the split-key kernel once s > 64; with
        # causal, keys past the 3 rows are masked and whole key chunks are skipped.
        "decode": sdpa(X["qd"], k, v, X["md"] > -1.5),
        "decode_causal": sdpa(X["qd3"], k, v, causal=True),
        "decode_hd128": sdpa(X["qd2"], X["k2"], X["v2"]),
    }


def _sdpa_ref(torch, W, X):
    F = torch.nn.functional
    q, k, v, m = X["q"], X["k"], X["v"], X["m"]

    def ref(q, k, v, mask=None, causal=False, scale=None):
        s = (q @ k.transpose(-1, -2)) * (scale if scale is not None else 1.0 / math.sqrt(q.shape[-1]))
        if causal:
            i = torch.arange(q.shape[-2], device=q.device)[:, None]
            j = torch.arange(k.shape[-2], device=q.device)[None, :]
            s = s.masked_fill(j > i, float("-inf"))
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
        return torch.softmax(s, -1) @ v

    del F
    return {"plain": ref(q, k, v), "causal": ref(q, k, v, causal=True), "scaled": ref(q, k, v, scale=0.3),
            "bool_mask": ref(q, k, v, m > -1.5), "additive_mask": ref(q, k, v, m * 2.0),
            "causal_hd128": ref(X["q2"], X["k2"], X["v2"], causal=True), "hd128": ref(X["q2"], X["k2"], X["v2"]),
            "cross_kv": ref(q, X["kc"], X["vc"]), "cross_causal": ref(q, X["kc"], X["vc"], causal=True),
            "hd40_dv24": ref(X["q3"], X["k3"], X["v3"], causal=True),
            "decode": ref(X["qd"], k, v, X["md"] > -1.5), "decode_causal": ref(X["qd3"], k, v, causal=True),
            "decode_hd128": ref(X["qd2"], X["k2"], X["v2"])}


# Attention on the heads of a fused QKV projection (GPT-2's layout): [b, s, 3·H·D] viewed as
# [b, s, 3, H, D], permuted to [3, b, H, s, D] and split; the output permuted back to [b, s, H, D]
# before the out projection. On CUDA stride_attention_operands turns both permutes into views and
# the attention kernels read q/k/v and write the output in place through strides; D 64 (4 heads)
# and 128 (2 heads), causal and not, plus one [b, H, s, D] output read straight from the sdpa.
SDPA_STRIDED_C = 64


def _sdpa_strided_build(ops, W, X):
    x = X["x"]
    B, S = x.shape[0], x.shape[1]
    out = {}
    for D, H in ((64, 4), (128, 2)):
        qkv = ops.gemm_rcr(x, W[f"w{D}"])
        heads = ops.permute(ops.reshape(qkv, [B, S, 3, H, D]), [2, 0, 3, 1, 4])
        q, k, v = (ops.reshape(t, [B, H, S, D]) for t in ops.split(heads, [1, 1, 1], axis=0))
        for causal in (False, True):
            o = ops.scaled_dot_product_attention(q, k, v, causal=causal)
            flat = ops.reshape(ops.permute(o, [0, 2, 1, 3]), [B, S, H * D])
            out[f"d{D}" + ("_causal" if causal else "")] = ops.gemm_rcr(flat, W[f"wo{D}"])
        if D == 64:
            out["d64_bhsd_scaled"] = ops.scaled_dot_product_attention(q, k, v, scale=0.3)
    return out


def _sdpa_strided_ref(torch, W, X):
    F = torch.nn.functional
    x = X["x"]
    B, S = x.shape[0], x.shape[1]

    def attn(q, k, v, causal=False, scale=None):
        s = (q @ k.transpose(-1, -2)) * (scale if scale is not None else 1.0 / math.sqrt(q.shape[-1]))
        if causal:
            i = torch.arange(q.shape[-2], device=q.device)[:, None]
            j = torch.arange(k.shape[-2], device=q.device)[None, :]
            s = s.masked_fill(j > i, float("-inf"))
        return torch.softmax(s, -1) @ v

    out = {}
    for D, H in ((64, 4), (128, 2)):
        q, k, v = F.linear(x, W[f"w{D}"]).view(B, S, 3, H, D).permute(2, 0, 3, 1, 4).unbind(0)
        for causal in (False, True):
            o = attn(q, k, v, causal).transpose(1, 2).reshape(B, S, H * D)
            out[f"d{D}" + ("_causal" if causal else "")] = F.linear(o, W[f"wo{D}"])
        if D == 64:
            out["d64_bhsd_scaled"] = attn(q, k, v, scale=0.3)
    return out


# ---- ResNet (torchvision's BasicBlock / Bottleneck layout and parameter names) --------------------

RESNET = {"resnet18": ("basic", (2, 2, 2, 2)), "resnet50": ("bottleneck", (3, 4, 6, 3))}


def resnet_param_shapes(arch, width=64, num_classes=1000):
    kind, layers = RESNET[arch]
    exp = 1 if kind == "basic" else 4
    W = {}

    def conv(name, o, i, k):
        W[name + ".weight"] = ([o, i, k, k], "conv")

    def bn(name, c):
        W[name + ".weight"], W[name + ".bias"] = ([c], "one"), ([c], "small")
        W[name + ".running_mean"], W[name + ".running_var"] = ([c], "small"), ([c], "one")

    conv("conv1", width, 3, 7)
    bn("bn1", width)
    inpl = width
    for li, n in enumerate(layers):
        planes = width * 2 ** li
        for bi in range(n):
            p = f"layer{li + 1}.{bi}"
            stride = 2 if (li > 0 and bi == 0) else 1
            if kind == "basic":
                conv(p + ".conv1", planes, inpl, 3); bn(p + ".bn1", planes)
                conv(p + ".conv2", planes, planes, 3); bn(p + ".bn2", planes)
            else:
                conv(p + ".conv1", planes, inpl, 1); bn(p + ".bn1", planes)
                conv(p + ".conv2", planes, planes, 3); bn(p + ".bn2", planes)
                conv(p + ".conv3", planes * exp, planes, 1); bn(p + ".bn3", planes * exp)
            if bi == 0 and (stride != 1 or inpl != planes * exp):
                conv(p + ".downsample.0", planes * exp, inpl, 1); bn(p + ".downsample.1", planes * exp)
            inpl = planes * exp
    W["fc.weight"], W["fc.bias"] = ([num_classes, inpl], "w"), ([num_classes], "small")
    return W


def resnet_module(dml, arch, dtype, width=64, num_classes=1000):
    nn = dml.nn
    kind, layers = RESNET[arch]
    exp = 1 if kind == "basic" else 4

    class Block(dml.Module):
        def __init__(self, inpl, planes, stride, down):
            if kind == "basic":
                self.conv1 = nn.Conv2d(inpl, planes, 3, stride=stride, padding=1, bias=False, dtype=dtype)
                self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False, dtype=dtype)
            else:
                self.conv1 = nn.Conv2d(inpl, planes, 1, bias=False, dtype=dtype)
                self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False, dtype=dtype)
                self.conv3 = nn.Conv2d(planes, planes * exp, 1, bias=False, dtype=dtype)
                self.bn3 = nn.BatchNorm2d(planes * exp, dtype=dtype)
            self.bn1 = nn.BatchNorm2d(planes, dtype=dtype)
            self.bn2 = nn.BatchNorm2d(planes, dtype=dtype)
            self.relu = nn.ReLU()
            self.downsample = down

        def forward(self, x):
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            if kind != "basic":
                out = self.bn3(self.conv3(self.relu(out)))
            idt = self.downsample(x) if self.downsample is not None else x
            return self.relu(out + idt)

    class Net(dml.Module):
        def __init__(self):
            self.conv1 = nn.Conv2d(3, width, 7, stride=2, padding=3, bias=False, dtype=dtype)
            self.bn1 = nn.BatchNorm2d(width, dtype=dtype)
            self.relu = nn.ReLU()
            self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
            inpl = width
            for li, n in enumerate(layers):
                planes = width * 2 ** li
                blocks = []
                for bi in range(n):
                    stride = 2 if (li > 0 and bi == 0) else 1
                    down = None
                    if bi == 0 and (stride != 1 or inpl != planes * exp):
                        down = nn.Sequential(nn.Conv2d(inpl, planes * exp, 1, stride=stride, bias=False, dtype=dtype),
                                             nn.BatchNorm2d(planes * exp, dtype=dtype))
                    blocks.append(Block(inpl, planes, stride, down))
                    inpl = planes * exp
                setattr(self, f"layer{li + 1}", nn.Sequential(*blocks))
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(inpl, num_classes, dtype=dtype)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(dml.ops.flatten(self.avgpool(x), start_dim=1))

    return Net()


def resnet_torch(torch, arch, W, dtype, channels_last=False):
    """The same network as a torchvision model when torchvision is there (eval), else None."""
    try:
        import torchvision
    except ImportError:
        return None
    m = getattr(torchvision.models, arch)(weights=None, num_classes=W["fc.bias"].shape[0])
    sd = m.state_dict()
    for k in sd:
        if k in W:
            sd[k] = W[k].float().cpu()
    m.load_state_dict(sd)
    m = m.to(device="cuda", dtype=dtype).eval()
    return m.to(memory_format=torch.channels_last) if channels_last else m


def resnet_functional(torch, arch, W, x):
    """Functional PyTorch forward of the ResNet (the parity oracle; no torchvision needed)."""
    F = torch.nn.functional
    kind, layers = RESNET[arch]

    def bn(t, p):
        return F.batch_norm(t, W[p + ".running_mean"], W[p + ".running_var"], W[p + ".weight"], W[p + ".bias"], False,
                            0.0, 1e-5)

    def conv(t, p, stride=1, pad=0):
        return F.conv2d(t, W[p + ".weight"], stride=stride, padding=pad)

    x = F.max_pool2d(torch.relu(bn(conv(x, "conv1", 2, 3), "bn1")), 3, 2, 1)
    for li, n in enumerate(layers):
        for bi in range(n):
            p = f"layer{li + 1}.{bi}"
            stride = 2 if (li > 0 and bi == 0) else 1
            if kind == "basic":
                out = torch.relu(bn(conv(x, p + ".conv1", stride, 1), p + ".bn1"))
                out = bn(conv(out, p + ".conv2", 1, 1), p + ".bn2")
            else:
                out = torch.relu(bn(conv(x, p + ".conv1"), p + ".bn1"))
                out = torch.relu(bn(conv(out, p + ".conv2", stride, 1), p + ".bn2"))
                out = bn(conv(out, p + ".conv3"), p + ".bn3")
            idt = bn(conv(x, p + ".downsample.0", stride), p + ".downsample.1") if p + ".downsample.0.weight" in W else x
            x = torch.relu(out + idt)
    return F.linear(x.mean((2, 3)), W["fc.weight"], W["fc.bias"])


def _resnet18_ref(torch, W, X):
    return {"output": resnet_functional(torch, "resnet18", W, X["x"])}


# Attention benchmark (issue target): bf16, batch 8, 32 heads, head dim 128, seq 1024 and 4096.
ATTN_BENCH = {"batch": 8, "heads": 32, "hd": 128, "seqs": (1024, 4096)}
# Head dim 64 (the GPT-2-medium attention shape: batch 8, 16 heads, seq 1024, causal).
ATTN_BENCH_D64 = {"batch": 8, "heads": 16, "hd": 64, "seqs": (1024,)}
RESNET50_BENCH = {"batch": 32, "hw": 224}


def bench_cases():
    """Artifacts compiled only for the benchmarks (no parity grid beyond one point)."""
    out = []
    B, H, hd = ATTN_BENCH["batch"], ATTN_BENCH["heads"], ATTN_BENCH["hd"]
    for causal in (False, True):
        out.append(Case("attn_bench" + ("_causal" if causal else ""), "bfloat16",
                        {"q": [B, H, "s", hd], "k": [B, H, "s", hd], "v": [B, H, "s", hd]}, {},
                        {"s": (1, max(ATTN_BENCH["seqs"]), list(ATTN_BENCH["seqs"]))}, [{"s": 1024}],
                        (lambda c: lambda ops, W, X: {"y": ops.scaled_dot_product_attention(X["q"], X["k"], X["v"], causal=c)})(causal),
                        (lambda c: lambda torch, W, X: {"y": torch.nn.functional.scaled_dot_product_attention(X["q"], X["k"], X["v"], is_causal=c)})(causal),
                        tol=TOL["bfloat16"]))
    B, H, hd = ATTN_BENCH_D64["batch"], ATTN_BENCH_D64["heads"], ATTN_BENCH_D64["hd"]
    out.append(Case("attn_bench_d64_causal", "bfloat16", {"q": [B, H, "s", hd], "k": [B, H, "s", hd], "v": [B, H, "s", hd]}, {},
                    {"s": (1, max(ATTN_BENCH_D64["seqs"]), list(ATTN_BENCH_D64["seqs"]))}, [{"s": 1024}],
                    lambda ops, W, X: {"y": ops.scaled_dot_product_attention(X["q"], X["k"], X["v"], causal=True)},
                    lambda torch, W, X: {"y": torch.nn.functional.scaled_dot_product_attention(X["q"], X["k"], X["v"], is_causal=True)},
                    tol=TOL["bfloat16"]))
    out.append(Case("resnet50_bench", "bfloat16", {"x": [RESNET50_BENCH["batch"], 3, RESNET50_BENCH["hw"], RESNET50_BENCH["hw"]]},
                    resnet_param_shapes("resnet50"), {}, [{}], "resnet50",
                    lambda torch, W, X: {"output": resnet_functional(torch, "resnet50", W, X["x"])},
                    tol=(1e-1, 5e-2)))
    return out


def cases():
    out = []
    for dt in DT:
        out.append(Case("gemm", dt, {"x": [2, "m", 64], "d": [2, "m", 96]},
                        {"w": ([96, 64], "w"), "b": ([96], "small"), "w2": ([64, 96], "w")},
                        {"m": (1, 256, [16, 256])}, [{"m": 1}, {"m": 16}, {"m": 100}, {"m": 256}], _gemm_build, _gemm_ref))
        if dt != "float32":
            out.append(Case("gemm_wgmma", dt, {"x": ["m", 520], "d": ["m", 256]},
                            {"w": ([300, 520], "w"), "b": ([300], "small"), "w3": ([256, 520], "w"), "b3": ([256], "small")},
                            {"m": (1, 768, [64, 768])}, [{"m": 1}, {"m": 130}, {"m": 700}], _gemm_wg_build, _gemm_wg_ref))
        if dt != "float32":  # erf GELU at a shape where sm_90a artifacts default to the persistent epilogue-warp
            # kernel (M, N >= 4096, K <= 1024 constant: kernels/cuda/gemm_wgmma_epi.cu); cuBLASLt elsewhere
            out.append(Case("gemm_gelu_epi", dt, {"x": [4096, 1024]}, {"w": ([4096, 1024], "w"), "b": ([4096], "small")},
                            {}, [{}], lambda ops, W, X: {"gelu": ops.gemm_rcr_bias_gelu(X["x"], W["w"], W["b"])},
                            lambda torch, W, X: {"gelu": torch.nn.functional.gelu(torch.nn.functional.linear(X["x"], W["w"], W["b"]))}))
        if dt != "float32":  # constant M <= 16 with a constant weight, 1024 <= N, K < 2048 (N < 3072): sm_90a artifacts
            # default to the skinny kernels launched with PDL weight prefetch (DML_CUDA_GEMM_SKINNY_PF: kernels/cuda/gemm_skinny.cu)
            out.append(Case("gemm_skinny_pf", dt, {"x": [5, 1536], "x16": [16, 1536]},
                            {"w": ([1024, 1536], "w"), "b": ([1024], "small")}, {}, [{}],
                            lambda ops, W, X: {"m5": ops.gemm_rcr_bias(X["x"], W["w"], W["b"]),
                                               "m16": ops.gemm_rcr(X["x16"], W["w"])},
                            lambda torch, W, X: {"m5": torch.nn.functional.linear(X["x"], W["w"], W["b"]),
                                                 "m16": torch.nn.functional.linear(X["x16"], W["w"])}))
        if dt != "float32":  # the same with K >= 2048: sm_90a artifacts default to the skinny kernel on a
            # weight packed at module init (DML_CUDA_GEMM_SKINNY_PACKED); N % 8 != 0 and K % 32 != 0 exercise the padding
            out.append(Case("gemm_skinny_packed", dt, {"x": [1, 2056], "x9": [9, 2056], "x16": [16, 2056]},
                            {"w": ([3076, 2056], "w"), "b": ([3076], "small")}, {}, [{}],
                            lambda ops, W, X: {"m1": ops.gemm_rcr_bias(X["x"], W["w"], W["b"]),
                                               "m9": ops.gemm_rcr_bias_gelu(X["x9"], W["w"], W["b"]),
                                               "m16": ops.gemm_rcr(X["x16"], W["w"])},
                            lambda torch, W, X: {"m1": torch.nn.functional.linear(X["x"], W["w"], W["b"]),
                                                 "m9": torch.nn.functional.gelu(torch.nn.functional.linear(X["x9"], W["w"], W["b"])),
                                                 "m16": torch.nn.functional.linear(X["x16"], W["w"])}))
        if dt != "float32":  # a wide weight (4096 < N <= 14336, 2048 <= K <= 4096) at M <= 8: also the packed launch
            out.append(Case("gemm_skinny_wide", dt, {"x": [8, 2048], "x2": [2, 2048]},
                            {"w": ([4104, 2048], "w"), "b": ([4104], "small")}, {}, [{}],
                            lambda ops, W, X: {"m8": ops.gemm_rcr_bias(X["x"], W["w"], W["b"]), "m2": ops.gemm_rcr(X["x2"], W["w"])},
                            lambda torch, W, X: {"m8": torch.nn.functional.linear(X["x"], W["w"], W["b"]),
                                                 "m2": torch.nn.functional.linear(X["x2"], W["w"])}))
        out.append(Case("bmm_softmax", dt, {"q": ["b", 4, "s", 32], "k": ["b", 4, "s", 32], "v": ["b", 4, "s", 32]},
                        {"wh": ([1, 4, 32, 16], "w"), "wa": ([1, 1, 32, 8], "w")},
                        {"b": (1, 4, [1, 4]), "s": (1, 64, [8, 64])}, [{"b": 1, "s": 1}, {"b": 4, "s": 8}, {"b": 3, "s": 50}],
                        _bmm_build, _bmm_ref))
        out.append(Case("norm_reduce", dt, {"x": ["r", 96], "x3": ["r", 6, 16]}, {"g": ([96], "one"), "b": ([96], "small")},
                        {"r": (1, 64, [8, 64])}, [{"r": 1}, {"r": 8}, {"r": 37}], _norm_build, _norm_ref))
        out.append(Case("norm_wide", dt, {"x": ["r", 2048], "xo": ["r", 1027]}, {"g": ([2048], "one"), "b": ([2048], "small")},
                        {"r": (1, 48, [16, 48])}, [{"r": 1}, {"r": 13}, {"r": 48}], _wide_build, _wide_ref))
        out.append(Case("group_norm_pad", dt, {"x": ["n", 32, 9, 11], "v": ["n", 6, 5, 4, 3]},
                        {"g": ([32], "one"), "b": ([32], "small"), "g6": ([6], "one"), "b6": ([6], "small")},
                        {"n": (1, 8, [2, 8])}, [{"n": 1}, {"n": 2}, {"n": 7}], _gn_pad_build, _gn_pad_ref))
        out.append(Case("data_movement", dt, {"x": ["b", 6, 10], "e": [1, 1, 10]}, {}, {"b": (1, 8, [8])},
                        [{"b": 1}, {"b": 5}], _move_build, _move_ref))
        out.append(Case("elementwise", dt, {"x": ["b", 32], "y": [32], "z": ["b", 1]}, {}, {"b": (1, 512, [512])},
                        [{"b": 1}, {"b": 333}], _ew_build, _ew_ref))
        out.append(Case("mlp", dt, {"x": ["batch", "seq", MLP_IN]},
                        {"0.weight": ([MLP_HID, MLP_IN], "w"), "0.bias": ([MLP_HID], "small"),
                         "2.weight": ([MLP_OUT, MLP_HID], "w"), "2.bias": ([MLP_OUT], "small")},
                        {"batch": (1, 8, [1, 4, 8]), "seq": (1, 64, [16, 64])},
                        [{"batch": 1, "seq": 1}, {"batch": 4, "seq": 16}, {"batch": 8, "seq": 64}], "mlp", _mlp_ref))
        tol = {"float32": (1e-4, 1e-5), "float16": (2e-2, 5e-3), "bfloat16": (8e-2, 2e-2)}[dt]
        out.append(Case("transformer", dt, {"x": ["batch", "seq", D_MODEL]}, tb_weights(),
                        {"batch": (1, 8, [1, 8]), "seq": (1, 128, [64, 128])},
                        [{"batch": 1, "seq": 128}, {"batch": 8, "seq": 128}, {"batch": 3, "seq": 50}], "transformer",
                        _tb_ref, tol=tol))
        out.append(Case("conv_pool", dt, {"x": ["n", 16, 13, 15], "r": ["n", 32, 13, 15], "img": ["n", 3, 20, 18]},
                        conv_weights(), {"n": (1, 8, [2, 8])}, [{"n": 1}, {"n": 2}, {"n": 5}], _conv_build, _conv_ref))
        out.append(Case("conv_nd", dt, {"a": ["n", 8, 37], "v": ["n", 6, 5, 9, 11], "s": ["n", 16, "h", "w"]},
                        conv_nd_weights(), {"n": (1, 4, [1, 4]), "h": (8, 64, [24, 64]), "w": (8, 64, [24, 64])},
                        [{"n": 1, "h": 8, "w": 13}, {"n": 2, "h": 30, "w": 17}, {"n": 3, "h": 64, "w": 41}],
                        _conv_nd_build, _conv_nd_ref))
        if dt != "float32":
            out.append(Case("conv_nhwc", dt, {"x": ["n", 24, 13, 15], "img": ["n", 3, 20, 18]}, conv_nhwc_weights(),
                            {"n": (1, 8, [2, 8])}, [{"n": 1}, {"n": 2}, {"n": 5}], _conv_nhwc_build, _conv_nhwc_ref))
        out.append(Case("sdpa", dt, {"q": ["b", 4, "s", 64], "k": ["b", 4, "s", 64], "v": ["b", 4, "s", 64],
                                     "m": ["b", 1, "s", "s"], "q2": ["b", 2, "s", 128], "k2": ["b", 2, "s", 128],
                                     "v2": ["b", 2, "s", 128], "kc": ["b", 4, 77, 64], "vc": ["b", 4, 77, 64],
                                     "q3": ["b", 3, "s", 40], "k3": ["b", 3, "s", 40], "v3": ["b", 3, "s", 24],
                                     "qd": ["b", 4, 1, 64], "qd3": ["b", 4, 3, 64], "md": ["b", 1, 1, "s"],
                                     "qd2": ["b", 2, 1, 128]},
                        {}, {"b": (1, 4, [1, 4]), "s": (1, 160, [64, 160])},
                        [{"b": 1, "s": 8}, {"b": 2, "s": 64}, {"b": 3, "s": 157}], _sdpa_build, _sdpa_ref))
        if dt != "float32":
            C_ = SDPA_STRIDED_C
            out.append(Case("sdpa_strided", dt, {"x": ["b", "s", C_]},
                            {"w64": ([768, C_], "w"), "wo64": ([C_, 256], "w"), "w128": ([768, C_], "w"),
                             "wo128": ([C_, 256], "w")},
                            {"b": (1, 4, [1, 4]), "s": (1, 160, [64, 160])},
                            [{"b": 1, "s": 8}, {"b": 2, "s": 64}, {"b": 3, "s": 157}], _sdpa_strided_build,
                            _sdpa_strided_ref, tol={"float16": (2e-2, 5e-3), "bfloat16": (8e-2, 2e-2)}[dt]))
        rtol = {"float32": (1e-4, 1e-5), "float16": (2e-2, 1e-2), "bfloat16": (1e-1, 4e-2)}[dt]
        out.append(Case("resnet18", dt, {"x": ["batch", 3, 64, 64]}, resnet_param_shapes("resnet18"),
                        {"batch": (1, 8, [1, 8])}, [{"batch": 1}, {"batch": 3}, {"batch": 8}], "resnet18",
                        _resnet18_ref, tol=rtol))
    return out


# Benchmarks: the transformer block at batch 1 and 8, seq 128, per dtype (the parity artifacts:
# float32 without TF32 on both sides).
BENCH = [("transformer", dt) for dt in DT]


# ---- weights: a counter-based generator (splitmix64), bit-identical under any NumPy version, so
# the GPU machine regenerates exactly the weights the artifact was compiled with (checked by hash).

def det_uniform(n, seed):
    import numpy as np
    with np.errstate(over="ignore"):
        z = np.arange(n, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15) + np.uint64((seed * 0xD1B54A32D192ED03) % 2**64)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) * (1.0 / 2**53)


def round_bf16(x):
    import numpy as np
    x = np.ascontiguousarray(x, dtype=np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return bits.astype(np.uint32).view(np.float32).reshape(x.shape)


def make_weights(case, seed):
    """{name: array} in the case's dtype (bf16 as rounded float32), unit-variance uniform noise
    scaled by kind: "w" 1/sqrt(fan_in), "one" 1 + 0.1 noise, "small" 0.1 noise."""
    import numpy as np
    out = {}
    for k, (name, (shape, kind)) in enumerate(sorted(case.weights.items())):
        n = int(np.prod(shape))
        v = ((det_uniform(n, seed * 1000 + k) * 2.0 - 1.0) * np.sqrt(3.0)).reshape(shape)
        if kind == "w":
            v = v / np.sqrt(shape[-1] if len(shape) > 1 else shape[0])
        elif kind == "conv":
            # 16 levels in [-sqrt(3), sqrt(3)] / sqrt(fan_in): unit-variance-like, and the big
            # ResNet constants compress to about 4 bits per value in the bundle.
            lv = np.floor(det_uniform(n, seed * 1000 + k) * 16.0).reshape(shape)
            v = (lv - 7.5) / 7.5 * np.sqrt(3.0) / np.sqrt(float(np.prod(shape[1:])))
        elif kind == "one":
            v = 1.0 + 0.1 * v
        else:
            v = 0.1 * v
        v = v.astype(np.float32)
        if case.dtype == "float16":
            v = v.astype(np.float16)
        elif case.dtype == "bfloat16":
            v = round_bf16(v)
        out[name] = v
    return out


def seed_of(key):
    import zlib
    return zlib.crc32(key.encode()) % 100000


def weights_digest(W):
    import hashlib
    h = hashlib.sha256()
    for name in sorted(W):
        h.update(name.encode())
        h.update(W[name].tobytes())
    return h.hexdigest()

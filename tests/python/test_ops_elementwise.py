"""Parity of the elementwise ops (docs/ops.md "Elementwise") on the CPU target.

Float ops run in float32/float16/bfloat16, the integer subset in int8/uint8/int32/int64, the
comparisons also on bool; shapes cover equal shapes, [B,1,N] (+) [N], two-sided broadcasting,
Python-scalar operands and a dynamic dim B run at several sizes.  A few multi-op chains exercise
fuse_elementwise.  `cast` is tested between every pair of distinct dtypes.  One artifact per
(family, dtype).
"""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import op_harness as H
from op_harness import Batch, Case, Gen, Inp

B_DIM = {"B": dict(min=1, max=8, typical=4, buckets=[2, 8])}
B_RUNS = [{"B": b} for b in (1, 3, 8)]


def _torch():
    import torch
    return torch


# ---- binary ---------------------------------------------------------------------------------

BINARY_NP = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum, "min": np.minimum,
    "pow": np.power,
}
BINARY_TORCH = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b, "max": lambda a, b: _torch().maximum(a, b),
    "min": lambda a, b: _torch().minimum(a, b), "pow": lambda a, b: _torch().pow(a, b),
}
# The three shape patterns of every binary op: equal shapes, [B,1,N] (+) [N], [B,1,N] (+) [5,1].
BINARY_SHAPES = {
    "same": (("B", 5, 6), ("B", 5, 6)),
    "bcastN": (("B", 1, 6), (6,)),
    "bcast2": (("B", 1, 6), (5, 1)),
}


def _np_binary(op, is_int):
    if op == "div":
        return np.floor_divide if is_int else np.divide
    return BINARY_NP[op]


def _binary_gens(op, dtype):
    """(lhs, rhs) generators keeping results defined and in range for `dtype`."""
    if op == "pow":
        return Gen(0.5, 2.0), Gen(-2.0, 2.0)
    if op == "div":
        return (Gen(-20, 20) if dtype != "uint8" else Gen(0, 40)), Gen(0.5 if dtype in H.FLOAT_DTYPES else 1, 7,
                                                                       away_from_zero=True)
    if op == "sub" and dtype == "uint8":  # no wrap-around: lhs >= rhs
        return Gen(10, 20), Gen(0, 10)
    if dtype in H.INT_DTYPES:
        return (Gen(0, 11), Gen(0, 11)) if dtype == "uint8" else (Gen(-11, 11), Gen(-11, 11))
    return H.U, H.U


def _binary_case(op, dtype, shape_key):
    ga, gb = _binary_gens(op, dtype)
    sa, sb = BINARY_SHAPES[shape_key]
    f = _np_binary(op, dtype in H.INT_DTYPES)
    tf = BINARY_TORCH[op] if dtype in H.FLOAT_DTYPES else None
    return Case(f"{op}-{shape_key}-{dtype}", {"a": Inp(sa, dtype, ga), "b": Inp(sb, dtype, gb)},
                lambda ops, t: getattr(ops, op)(t["a"], t["b"]),
                lambda x: f(x["a"], x["b"]), dtype,
                torch=(lambda x: tf(x["a"], x["b"])) if tf else None)


def _scalar_case(op, dtype, scalar, left=False):
    """Python scalar operand: the front end makes it a constant of the tensor's dtype."""
    ga, gb = _binary_gens(op, dtype)
    g = gb if left else ga
    f = _np_binary(op, dtype in H.INT_DTYPES)
    side = "lscalar" if left else "scalar"

    def build(ops, t):
        return getattr(ops, op)(scalar, t["a"]) if left else getattr(ops, op)(t["a"], scalar)

    def oracle(x):
        s = np.asarray(scalar, dtype=x["a"].dtype)
        if dtype == "bfloat16":
            s = H.round_bf16(s).astype(np.float64)
        elif dtype == "float16":
            s = s.astype(np.float16).astype(np.float64)
        return f(s, x["a"]) if left else f(x["a"], s)

    return Case(f"{op}-{side}{scalar}-{dtype}", {"a": Inp(("B", 4), dtype, g)}, build, oracle, dtype)


# ---- unary ----------------------------------------------------------------------------------

# op -> (generator, numpy, torch)
UNARY = {
    "relu": (H.U, lambda x: np.maximum(x, 0), lambda x: _torch().relu(x)),
    "neg": (H.U, np.negative, lambda x: -x),
    "abs": (H.U, np.abs, lambda x: x.abs()),
    "gelu": (Gen(-4, 4), H.np_gelu, lambda x: _torch().nn.functional.gelu(x)),
    "fast_gelu": (Gen(-4, 4), H.np_fast_gelu, lambda x: _torch().nn.functional.gelu(x, approximate="tanh")),
    "silu": (Gen(-4, 4), H.np_silu, lambda x: _torch().nn.functional.silu(x)),
    "sigmoid": (Gen(-6, 6), H.np_sigmoid, lambda x: x.sigmoid()),
    "tanh": (Gen(-3, 3), np.tanh, lambda x: x.tanh()),
    "exp": (Gen(-3, 3), np.exp, lambda x: x.exp()),
    "log": (H.POSITIVE, np.log, lambda x: x.log()),
    "sqrt": (H.POSITIVE, np.sqrt, lambda x: x.sqrt()),
    "rsqrt": (H.POSITIVE, lambda x: 1.0 / np.sqrt(x), lambda x: x.rsqrt()),
    "sin": (Gen(-4, 4), np.sin, lambda x: x.sin()),
    "cos": (Gen(-4, 4), np.cos, lambda x: x.cos()),
    "erf": (Gen(-3, 3), H.np_erf, lambda x: _torch().erf(x)),
    "floor": (Gen(-4, 4), np.floor, lambda x: x.floor()),
    "ceil": (Gen(-4, 4), np.ceil, lambda x: x.ceil()),
    "round": (Gen(-4, 4), np.round, lambda x: x.round()),
    "asin": (Gen(-0.99, 0.99), np.arcsin, lambda x: x.asin()),
    "acos": (Gen(-0.99, 0.99), np.arccos, lambda x: x.acos()),
    "atan": (Gen(-4, 4), np.arctan, lambda x: x.atan()),
}
INT_UNARY = ("relu", "neg", "abs")


def _unary_case(op, dtype):
    gen, f, tf = UNARY[op]
    if dtype in H.INT_DTYPES:
        gen = Gen(0, 100) if dtype == "uint8" else Gen(-100, 100)
    return Case(f"{op}-{dtype}", {"x": Inp(("B", 3, 7), dtype, gen)},
                lambda ops, t: getattr(ops, op)(t["x"]), lambda x: f(x["x"]), dtype,
                torch=(lambda x: tf(x["x"])) if dtype in H.FLOAT_DTYPES else None)


# ---- clamp / where / comparisons ------------------------------------------------------------

def _clamp_cases(dtype):
    lo, hi = (2.0, 7.0) if dtype == "uint8" else (-1.0, 1.5) if dtype in H.FLOAT_DTYPES else (-3.0, 4.0)
    gen = Gen(0, 10) if dtype == "uint8" else Gen(-10, 10) if dtype in H.INT_DTYPES else H.U
    out = []
    for tag, kw in (("minmax", dict(min=lo, max=hi)), ("min", dict(min=lo)), ("max", dict(max=hi))):
        out.append(Case(f"clamp-{tag}-{dtype}", {"x": Inp(("B", 9), dtype, gen)},
                        lambda ops, t, kw=kw: ops.clamp(t["x"], **kw),
                        lambda x, kw=kw: np.clip(x["x"], kw.get("min"), kw.get("max")), dtype,
                        torch=(lambda x, kw=kw: _torch().clamp(x["x"], kw.get("min"), kw.get("max")))
                        if dtype in H.FLOAT_DTYPES else None))
    return out


def _where_cases(dtype):
    g = Gen(0, 50) if dtype == "uint8" else Gen(-50, 50) if dtype in H.INT_DTYPES else H.U
    return [
        Case(f"where-bcast-{dtype}",
             {"c": Inp((6,), "bool"), "a": Inp(("B", 5, 6), dtype, g), "b": Inp(("B", 1, 6), dtype, g)},
             lambda ops, t: ops.where(t["c"], t["a"], t["b"]),
             lambda x: np.where(x["c"], x["a"], x["b"]), dtype,
             torch=lambda x: _torch().where(x["c"], x["a"], x["b"])),
        Case(f"where-same-{dtype}",
             {"c": Inp((3, 4), "bool"), "a": Inp((3, 4), dtype, g), "b": Inp((3, 4), dtype, g)},
             lambda ops, t: ops.where(t["c"], t["a"], t["b"]),
             lambda x: np.where(x["c"], x["a"], x["b"]), dtype),
    ]


COMPARE_NP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
              "gt": np.greater, "ge": np.greater_equal}


def _compare_cases(dtype):
    # Values on a coarse grid so that equal elements occur and eq/le/ge are not trivial.
    g = Gen(-2, 2, grid=0.5) if dtype in H.FLOAT_DTYPES else Gen(0, 3) if dtype == "uint8" else Gen(-2, 2)
    out = []
    for op, f in COMPARE_NP.items():
        out.append(Case(f"{op}-bcastN-{dtype}", {"a": Inp(("B", 1, 6), dtype, g), "b": Inp((6,), dtype, g)},
                        lambda ops, t, op=op: getattr(ops, op)(t["a"], t["b"]),
                        lambda x, f=f: f(x["a"], x["b"]), "bool"))
    return out


# ---- fused chains (fuse_elementwise builds one kernel from several ops) ----------------------

def _chain_cases(dtype):
    return [
        Case(f"chain-tanh_mul_add-{dtype}",
             {"x": Inp(("B", 5, 6), dtype), "y": Inp((6,), dtype), "z": Inp(("B", 1, 1), dtype)},
             lambda ops, t: ops.tanh(ops.add(ops.mul(t["x"], t["y"]), t["z"])),
             lambda x: np.tanh(x["x"] * x["y"] + x["z"]), dtype),
        Case(f"chain-gelu_sigmoid_clamp-{dtype}",
             {"x": Inp(("B", 7), dtype), "y": Inp(("B", 7), dtype), "z": Inp((7,), dtype)},
             lambda ops, t: ops.sub(ops.mul(ops.gelu(t["x"]), ops.sigmoid(t["y"])),
                                    ops.clamp(t["z"], min=-1.0, max=1.0)),
             lambda x: H.np_gelu(x["x"]) * H.np_sigmoid(x["y"]) - np.clip(x["z"], -1, 1), dtype),
        Case(f"chain-where_gt_exp_neg-{dtype}",
             {"x": Inp(("B", 8), dtype), "y": Inp((8,), dtype)},
             lambda ops, t: ops.where(ops.gt(t["x"], t["y"]), ops.exp(t["x"]), ops.neg(t["y"])),
             lambda x: np.where(x["x"] > x["y"], np.exp(x["x"]), np.broadcast_to(-x["y"], x["x"].shape)),
             dtype),
        Case(f"chain-scalars-{dtype}", {"x": Inp(("B", 8), dtype)},
             lambda ops, t: ops.mul(ops.add(ops.rsqrt(ops.add(ops.mul(t["x"], t["x"]), 1.0)), 0.5), 2.0),
             lambda x: (1.0 / np.sqrt(x["x"] * x["x"] + 1.0) + 0.5) * 2.0, dtype),
    ]


def _large_cases(dtype):
    """Sizes well past one vector / one thread's chunk, with ragged tails."""
    return [
        Case(f"add-large-bcast-{dtype}", {"a": Inp(("B", 37, 129), dtype), "b": Inp((129,), dtype)},
             lambda ops, t: ops.add(t["a"], t["b"]), lambda x: x["a"] + x["b"], dtype),
        Case(f"chain-large-{dtype}", {"a": Inp(("B", 4111), dtype), "b": Inp(("B", 1), dtype)},
             lambda ops, t: ops.silu(ops.mul(t["a"], t["b"])), lambda x: H.np_silu(x["a"] * x["b"]), dtype),
    ]


def float_batch(dtype):
    cases = []
    for op in ("add", "sub", "mul", "div", "pow", "max", "min"):
        for sk in BINARY_SHAPES:
            cases.append(_binary_case(op, dtype, sk))
    cases += [_scalar_case("add", dtype, 1.5), _scalar_case("mul", dtype, -2.0), _scalar_case("sub", dtype, 0.25),
              _scalar_case("sub", dtype, 3.0, left=True), _scalar_case("div", dtype, 4.0),
              _scalar_case("pow", dtype, 2.0), _scalar_case("max", dtype, 0.5)]
    cases += [_unary_case(op, dtype) for op in UNARY]
    cases += _clamp_cases(dtype) + _where_cases(dtype) + _compare_cases(dtype) + _chain_cases(dtype)
    cases += _large_cases(dtype)
    return Batch(f"elementwise-{dtype}", cases, dims=B_DIM, runs=B_RUNS)


def int_batch(dtype):
    cases = []
    for op in ("add", "sub", "mul", "div", "max", "min"):
        for sk in BINARY_SHAPES:
            cases.append(_binary_case(op, dtype, sk))
    cases += [_scalar_case("add", dtype, 3), _scalar_case("mul", dtype, 2), _scalar_case("div", dtype, 3)]
    cases += [_unary_case(op, dtype) for op in INT_UNARY if not (dtype == "uint8" and op == "neg")]
    cases += _clamp_cases(dtype) + _where_cases(dtype) + _compare_cases(dtype)
    return Batch(f"elementwise-{dtype}", cases, dims=B_DIM, runs=B_RUNS)


def bool_batch():
    cases = []
    for op, f in COMPARE_NP.items():
        cases.append(Case(f"{op}-bool", {"a": Inp((4, 5), "bool"), "b": Inp((5,), "bool")},
                          lambda ops, t, op=op: getattr(ops, op)(t["a"], t["b"]),
                          lambda x, f=f: f(x["a"], x["b"]), "bool"))
    cases.append(Case("where-bool", {"c": Inp((4, 5), "bool"), "a": Inp((4, 5), "bool"), "b": Inp((1, 5), "bool")},
                      lambda ops, t: ops.where(t["c"], t["a"], t["b"]),
                      lambda x: np.where(x["c"], x["a"], x["b"]), "bool"))
    return Batch("elementwise-bool", cases)


# ---- cast -------------------------------------------------------------------------------------

def _cast_source_gen(src, dst):
    """Values whose conversion src -> dst is defined by docs/ops.md (no overflow, no NaN)."""
    if dst == "bool":
        return Gen(-1, 1, grid=0.5) if src in H.FLOAT_DTYPES else Gen(0 if src == "uint8" else -2, 2)
    non_negative = dst == "uint8" or src == "uint8"
    if src in H.FLOAT_DTYPES:
        if dst in H.FLOAT_DTYPES:
            return Gen(-3.0, 3.0)
        return Gen(0.0, 200.0) if dst == "uint8" else Gen(-100.0, 100.0)  # fractional: truncation
    if src == "bool":
        return Gen()
    return Gen(0, 100) if non_negative else Gen(-100, 100)


def _cast_case(src, dst):
    def oracle(x):
        v = x["x"]
        if dst == "bool":
            return v != 0
        if dst in H.FLOAT_DTYPES:
            return v.astype(np.float64)
        return np.trunc(v.astype(np.float64)).astype(H.RESULT_NP_DTYPE[dst])

    return Case(f"cast-{src}-to-{dst}", {"x": Inp(("B", 11), src, _cast_source_gen(src, dst))},
                lambda ops, t: ops.cast(t["x"], dtype=dst), oracle, dst, exact=True)


def cast_batch():
    cases = [_cast_case(s, d) for s in H.ALL_DTYPES for d in H.ALL_DTYPES if s != d]
    return Batch("cast", cases, dims=B_DIM, runs=B_RUNS)


BATCHES = ([float_batch(dt) for dt in H.FLOAT_DTYPES] + [int_batch(dt) for dt in H.INT_DTYPES]
           + [bool_batch(), cast_batch()])

# Known failures: case id (or 'id@B=..') -> reason; see KNOWN_FAILURES.md.
XFAIL = {}


@pytest.mark.parametrize("batch,case,run", H.params(BATCHES, XFAIL))
def test_elementwise_parity(batch, case, run, tmp_path_factory):
    H.check(batch, case, run, "compiled", tmp_path_factory)


# ---- trace-time errors --------------------------------------------------------------------------

def test_broadcast_mismatch_is_a_trace_error():
    with pytest.raises(Exception) as ei:
        H.api_trace(lambda ops, t: ops.output(ops.add(t["a"], t["b"]), "y"),
                    {"a": ((2, 3), "float32"), "b": ((4,), "float32")})
    msg = str(ei.value)
    assert "add" in msg and "3" in msg and "4" in msg, msg


def test_dtype_mismatch_is_a_trace_error():
    with pytest.raises(Exception) as ei:
        H.api_trace(lambda ops, t: ops.output(ops.mul(t["a"], t["b"]), "y"),
                    {"a": ((3,), "float32"), "b": ((3,), "int32")})
    msg = str(ei.value)
    assert "mul" in msg and ("int32" in msg or "dtype" in msg), msg


def test_float_only_op_rejects_int_at_trace_time():
    with pytest.raises(Exception) as ei:
        H.api_trace(lambda ops, t: ops.output(ops.sqrt(t["a"]), "y"), {"a": ((3,), "int32")})
    assert "sqrt" in str(ei.value), str(ei.value)


def test_unknown_attribute_is_a_trace_error():
    with pytest.raises(Exception) as ei:
        H.api_trace(lambda ops, t: ops.output(ops.clamp(t["a"], minimum=0.0), "y"), {"a": ((3,), "float32")})
    msg = str(ei.value)
    assert "minimum" in msg and "clamp" in msg, msg


def test_cast_to_unknown_dtype_is_a_trace_error():
    with pytest.raises(Exception) as ei:
        H.api_trace(lambda ops, t: ops.output(ops.cast(t["a"], dtype="float13"), "y"), {"a": ((3,), "float32")})
    assert "float13" in str(ei.value), str(ei.value)


# ---- process-level robustness -------------------------------------------------------------------

_RELEASE_SCRIPT = textwrap.dedent("""
    import gc, sys, tempfile
    import numpy as np
    import dinoml as dml

    class M(dml.Module):
        def forward(self, x):
            return dml.ops.silu(dml.ops.mul(x, 2.0))

    spec = dml.trace(M(), inputs={"x": dml.TensorSpec([8, 4111], "float32")})
    out = tempfile.mkdtemp()
    dml.compile(spec, target="cpu", out=out)
    s = dml.runtime.load(out).create_session()
    s.run_numpy({"x": np.ones((8, 4111), np.float32)})   # large enough to start worker threads
    del s
    gc.collect()                                         # dlclose(module.so)
    import torch                                         # maps new libraries where libgomp was
    print("survived")
""")


# Regression test (KNOWN_FAILURES.md, fixed #3): module.so is opened with RTLD_NODELETE.
def test_releasing_a_session_after_a_threaded_run():
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.path.join(root, "python") + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-c", _RELEASE_SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "survived" in r.stdout, f"rc={r.returncode}\n{r.stderr[-2000:]}"

"""Shared machinery for the op parity tests (tests/python/test_ops_*.py).

Why batching: one compile + g++ of a small module costs about a second on the 2-core CI
machine, and the op catalogue has several hundred (op, dtype, shape) cases.  So cases are
grouped into a `Batch` (typically one per op family and dtype); a batch is traced into ONE
model whose forward computes every case from its own inputs and marks every result as a graph
output, compiled once, and run once per concrete dim assignment.  Each case is still its own
pytest item (parametrised with a readable id), which looks its outputs up in the cached batch
result.

Failure isolation: a case that fails to trace is recorded against that case only.  When the
whole batch fails to compile or run, the batch is bisected (re-traced and re-compiled in
halves) until the failing case(s) are isolated, so one bad op never hides the others.

Oracles: each case has a NumPy oracle (and optionally a PyTorch one) computed in float64
from exactly the rounded values the artifact received (fp16 / bf16 inputs are rounded first).

The harness talks to `dinoml` only through the small `_api_*` adaptors below, so a change of
the Python API touches one place.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import traceback
import zlib
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pytest

FLOAT_DTYPES = ("float32", "float16", "bfloat16")
INT_DTYPES = ("int8", "uint8", "int32", "int64")
ALL_DTYPES = FLOAT_DTYPES + INT_DTYPES + ("bool",)

# Default (rtol, atol) per output dtype: fp32 is tight; fp16 / bf16 allow for storage rounding
# (fp16 has 11 significant bits, bf16 8) plus a few intermediate roundings.
DEFAULT_TOL = {
    "float32": (1e-5, 1e-5),
    "float16": (1e-2, 1e-2),
    "bfloat16": (2e-2, 2e-2),
}

# numpy dtype the runtime hands back for each DinoML dtype (bf16 comes back as float32).
RESULT_NP_DTYPE = {
    "float32": np.float32, "float16": np.float16, "bfloat16": np.float32,
    "int8": np.int8, "uint8": np.uint8, "int32": np.int32, "int64": np.int64, "bool": np.bool_,
}


# ---------------------------------------------------------------------------------------------
# Rounding and data generation
# ---------------------------------------------------------------------------------------------

def round_bf16(x) -> np.ndarray:
    """Round to bfloat16 (nearest even), returned as float32 — what the runtime stores."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return bits.astype(np.uint32).view(np.float32).reshape(x.shape)


def to_runtime(arr, dtype: str) -> np.ndarray:
    """Converts generated values into the array fed to the runtime for `dtype`."""
    arr = np.asarray(arr)
    if dtype == "float32":
        return arr.astype(np.float32)
    if dtype == "float16":
        return arr.astype(np.float16)
    if dtype == "bfloat16":
        return round_bf16(arr.astype(np.float32))
    if dtype == "bool":
        return arr.astype(np.bool_)
    return arr.astype(RESULT_NP_DTYPE[dtype])


def to_oracle(arr: np.ndarray, dtype: str) -> np.ndarray:
    """The oracle's view of a runtime input: floats widened to float64, the rest unchanged."""
    return arr.astype(np.float64) if dtype in FLOAT_DTYPES else arr


@dataclasses.dataclass(frozen=True)
class Gen:
    """A value generator: uniform floats in [lo, hi] (ints: integers in [lo, hi]).

    away_from_zero: |v| in [lo, hi] with a random sign (divisors).  grid: floats restricted to
    multiples of `grid` (so equality comparisons see ties).  Bool dtype: fair coin.
    """
    lo: float = -2.0
    hi: float = 2.0
    away_from_zero: bool = False
    grid: Optional[float] = None

    def __call__(self, rng: np.random.Generator, shape, dtype: str) -> np.ndarray:
        shape = tuple(int(s) for s in shape)
        if dtype == "bool":
            return rng.integers(0, 2, size=shape).astype(np.bool_)
        if dtype in INT_DTYPES:
            if self.away_from_zero:  # magnitudes in [max(lo,1), hi], random sign when signed
                mag = rng.integers(max(int(self.lo), 1), int(self.hi) + 1, size=shape)
                return mag if dtype == "uint8" else mag * rng.choice([-1, 1], size=shape)
            return rng.integers(int(self.lo), int(self.hi) + 1, size=shape)
        if self.grid is not None:
            n_lo, n_hi = math.ceil(self.lo / self.grid), math.floor(self.hi / self.grid)
            return rng.integers(n_lo, n_hi + 1, size=shape) * self.grid
        v = rng.uniform(self.lo, self.hi, size=shape)
        if self.away_from_zero:
            v = np.abs(v) * rng.choice([-1.0, 1.0], size=shape)
        return v


U = Gen()
POSITIVE = Gen(0.1, 4.0)


@dataclasses.dataclass(frozen=True)
class Inp:
    """One case input: shape entries are ints or dim names (declared on the Batch)."""
    shape: Tuple[Any, ...]
    dtype: str
    gen: Gen = U


@dataclasses.dataclass
class Case:
    """One parity case.

    build(ops, t) -> tensor or tuple of tensors, where t maps the case's local input names to
    traced tensors.  oracle(x) -> array or tuple, where x maps the same names to float64 (float
    inputs) / native (int, bool) arrays.  out: DinoML dtype of each output (str: all outputs).
    torch(x) optionally gives a second oracle from float64 torch tensors.
    """
    id: str
    inputs: Dict[str, Inp]
    build: Callable
    oracle: Callable
    out: Any
    tol: Optional[Tuple[float, float]] = None
    torch: Optional[Callable] = None
    exact: bool = False  # floats compared bit-exactly (casts, data movement)

    def out_dtypes(self, n: int) -> List[str]:
        return [self.out] * n if isinstance(self.out, str) else list(self.out)


@dataclasses.dataclass
class Batch:
    """Cases compiled into one artifact. dims: name -> dict(min,max,typical,buckets);
    runs: list of concrete dim assignments (each run executes every case)."""
    name: str
    cases: List[Case]
    dims: Dict[str, dict] = dataclasses.field(default_factory=dict)
    runs: List[Dict[str, int]] = dataclasses.field(default_factory=lambda: [{}])

    def __post_init__(self):
        ids = [c.id for c in self.cases]
        dup = {i for i in ids if ids.count(i) > 1}
        assert not dup, f"batch {self.name}: duplicate case ids {sorted(dup)}"

    def __repr__(self):  # keeps pytest ids / tracebacks short
        return f"Batch({self.name})"


def run_id(run: Dict[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(run.items())) or "static"


def params(batches: Sequence[Batch], xfail: Optional[Dict[str, str]] = None, prefix: str = ""):
    """pytest params (batch, case, run_index) with ids '<case id>[<dims>]'.

    xfail maps a case id (or 'case id@dims' for one run) to the reason; it becomes
    xfail(strict=True) so a fixed bug makes the suite say so.
    """
    xfail = xfail or {}
    used = set()
    out = []
    for b in batches:
        for c in b.cases:
            for ri, run in enumerate(b.runs):
                rid = run_id(run)
                pid = f"{prefix}{c.id}" + ("" if rid == "static" else f"@{rid}")
                marks = []
                for key in (f"{prefix}{c.id}@{rid}", f"{prefix}{c.id}", pid):
                    if key in xfail:
                        used.add(key)
                        marks = [pytest.mark.xfail(strict=True, reason=xfail[key])]
                        break
                out.append(pytest.param(b, c, ri, id=pid, marks=marks))
    unknown = set(xfail) - used
    assert not unknown, f"xfail entries match no case: {sorted(unknown)}"
    return out


# ---------------------------------------------------------------------------------------------
# dinoml API adaptors (the only code that knows the Python API's shape)
# ---------------------------------------------------------------------------------------------

def dml():
    import dinoml
    return dinoml


def _api_dims(batch: Batch) -> Dict[str, Any]:
    d = dml()
    out = {}
    for name, spec in batch.dims.items():
        out[name] = d.Dim(name, spec["min"], spec["max"], typical=spec.get("typical"),
                          buckets=spec.get("buckets"))
    return out


def _make_model(input_names: List[str], body: Callable[[Dict[str, Any]], Any]):
    """A dml.Module whose forward has exactly one named parameter per graph input, so it works
    whether trace passes inputs positionally (dict order) or by keyword."""
    d = dml()
    params_src = "".join(f", {n}" for n in input_names)
    kwargs_src = ", ".join(f"{n}={n}" for n in input_names)
    src = f"def forward(self{params_src}):\n    return _body(dict({kwargs_src}))\n"
    ns: Dict[str, Any] = {"_body": body}
    exec(src, ns)  # noqa: S102 - generated from identifiers we made ourselves
    cls = type("OpParityBatch", (d.Module,), {"forward": ns["forward"]})
    return cls()


def api_trace(fn: Callable, inputs: Dict[str, Tuple[Tuple[Any, ...], str]], dims: Dict[str, dict] | None = None,
              name: str = "op_test"):
    """Traces `fn(ops, tensors)`; inputs: name -> (shape with dim names, dtype). Returns the
    Spec. Used directly by error tests."""
    d = dml()
    dim_objs = _api_dims(Batch(name, [], dims or {}))
    specs = {n: d.TensorSpec([dim_objs.get(s, s) if isinstance(s, str) else s for s in shp], dt)
             for n, (shp, dt) in inputs.items()}

    def body(t):
        res = fn(d.ops, t)
        return res

    return d.trace(_make_model(list(specs), body), inputs=specs, name=name)


def _api_compile(spec, out_dir: str):
    return dml().compile(spec, target="cpu", out=out_dir)


# Loaded artifacts and sessions stay alive until the process ends: releasing one dlcloses its
# module.so, which currently unloads libgomp under live OpenMP worker threads (KNOWN_FAILURES.md
# #1, reproduced by test_ops_elementwise.py::test_releasing_a_session_after_a_threaded_run).
_KEEP_ALIVE: List[Any] = []


def _api_run(art_dir: str, feeds_per_run: List[Dict[str, np.ndarray]]) -> List[Dict[str, np.ndarray]]:
    art = dml().runtime.load(art_dir)
    session = art.create_session()
    _KEEP_ALIVE.append((art, session))
    return [session.run_numpy(f) for f in feeds_per_run]


def _api_reference(spec, feeds_per_run: List[Dict[str, np.ndarray]]) -> List[Dict[str, np.ndarray]]:
    return [dml().reference(spec, f) for f in feeds_per_run]


# ---------------------------------------------------------------------------------------------
# Tracing, compiling and running a batch (with bisection on failure)
# ---------------------------------------------------------------------------------------------

@dataclasses.dataclass
class CaseError:
    stage: str
    message: str


def _in_name(ci: int, local: str) -> str:
    return f"c{ci}_{local}"


def _out_name(ci: int, k: int) -> str:
    return f"c{ci}_out{k}"


def _as_tuple(x) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _format_exc(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def _trace_group(batch: Batch, idxs: List[int]):
    """Traces cases `idxs` of `batch` into one Spec. Returns (spec, n_outputs per traced case,
    trace errors per case)."""
    d = dml()
    inputs = {}
    for ci in idxs:
        for local, inp in batch.cases[ci].inputs.items():
            inputs[_in_name(ci, local)] = (inp.shape, inp.dtype)
    n_out: Dict[int, int] = {}
    errors: Dict[int, CaseError] = {}

    def body_all(ops, t):
        for ci in idxs:
            case = batch.cases[ci]
            local = {k: t[_in_name(ci, k)] for k in case.inputs}
            try:
                res = _as_tuple(case.build(ops, local))
                for k, r in enumerate(res):
                    ops.output(r, _out_name(ci, k))
                n_out[ci] = len(res)
            except Exception as e:  # one bad case must not hide the others
                errors[ci] = CaseError("trace", _format_exc(e))
        return None

    spec = api_trace(body_all, inputs, batch.dims, name=f"ops_{_safe(batch.name)}")
    return spec, n_out, errors


def _safe(s: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in s)


def make_feeds(batch: Batch, idxs: Sequence[int]) -> List[Dict[str, np.ndarray]]:
    """Runtime inputs for every run; deterministic per (batch, case, input, run)."""
    runs = []
    for ri, run in enumerate(batch.runs):
        feeds = {}
        for ci in idxs:
            case = batch.cases[ci]
            for local, inp in case.inputs.items():
                feeds[_in_name(ci, local)] = _input_data(batch.name, case.id, local, ri, inp, run)
        runs.append(feeds)
    return runs


@functools.lru_cache(maxsize=None)
def _input_data_cached(batch_name, case_id, local, ri, inp, run_items) -> np.ndarray:
    run = dict(run_items)
    shape = [run[s] if isinstance(s, str) else s for s in inp.shape]
    rng = np.random.default_rng(zlib.crc32(f"{batch_name}/{case_id}/{local}/{ri}".encode()))
    return to_runtime(inp.gen(rng, shape, inp.dtype), inp.dtype)


def _input_data(batch_name, case_id, local, ri, inp, run) -> np.ndarray:
    arr = _input_data_cached(batch_name, case_id, local, ri, inp, tuple(sorted(run.items())))
    arr = arr.copy()
    arr.flags.writeable = True
    return arr


class _Executor:
    """Evaluates a batch in one mode ('compiled' or 'reference'); bisects on failure."""

    def __init__(self, batch: Batch, mode: str, mkdir: Optional[Callable[[str], str]]):
        self.batch, self.mode, self.mkdir = batch, mode, mkdir
        self.attempts = 0

    def evaluate(self, idxs: List[int]) -> Dict[int, Any]:
        results: Dict[int, Any] = {}
        try:
            spec, n_out, errors = _trace_group(self.batch, idxs)
            results.update(errors)
            ok = [ci for ci in idxs if ci in n_out]
            if not ok:
                return results
            feeds = make_feeds(self.batch, idxs)
            self.attempts += 1
            if self.mode == "compiled":
                art = self.mkdir(f"{_safe(self.batch.name)}_{self.attempts}")
                try:
                    _api_compile(spec, art)
                except Exception as e:
                    raise _StageError("compile", e) from e
                try:
                    outs = _api_run(art, feeds)
                except Exception as e:
                    raise _StageError("run", e) from e
            else:
                try:
                    outs = _api_reference(spec, feeds)
                except Exception as e:
                    raise _StageError("reference", e) from e
            for ci in ok:
                per_run = []
                for o in outs:
                    names = [_out_name(ci, k) for k in range(n_out[ci])]
                    missing = [n for n in names if n not in o]
                    if missing:
                        raise _StageError("outputs", KeyError(f"outputs {missing} missing from the result "
                                                              f"(have {sorted(o)[:8]}...)"))
                    per_run.append(tuple(np.asarray(o[n]) for n in names))
                results[ci] = per_run
            return results
        except Exception as e:
            stage = e.stage if isinstance(e, _StageError) else "trace"
            if isinstance(e, ImportError):  # the package itself is broken: bisecting cannot help
                return {ci: CaseError("import", _format_exc(e)) for ci in idxs}
            if len(idxs) == 1:
                msg = _format_exc(e.inner if isinstance(e, _StageError) else e)
                if not isinstance(e, _StageError):
                    msg += "\n" + traceback.format_exc(limit=-3)
                return {idxs[0]: CaseError(stage, msg)}
            mid = len(idxs) // 2
            results = self.evaluate(idxs[:mid])
            results.update(self.evaluate(idxs[mid:]))
            return results


class _StageError(Exception):
    def __init__(self, stage: str, inner: BaseException):
        super().__init__(f"{stage}: {_format_exc(inner)}")
        self.stage, self.inner = stage, inner


_RESULTS: Dict[Tuple[int, str], Dict[int, Any]] = {}


def batch_results(batch: Batch, mode: str, tmp_path_factory=None) -> Dict[int, Any]:
    key = (id(batch), mode)
    if key not in _RESULTS:
        mkdir = None
        if mode == "compiled":
            def mkdir(stem):
                return str(tmp_path_factory.mktemp(stem))
        _RESULTS[key] = _Executor(batch, mode, mkdir).evaluate(list(range(len(batch.cases))))
    return _RESULTS[key]


# ---------------------------------------------------------------------------------------------
# Checking one case
# ---------------------------------------------------------------------------------------------

def _case_index(batch: Batch, case: Case) -> int:
    # Identity, not ==: dataclass equality would compare every field (lambdas included).
    for i, c in enumerate(batch.cases):
        if c is case:
            return i
    raise KeyError(case.id)


def oracle_inputs(batch: Batch, case: Case, ri: int) -> Dict[str, np.ndarray]:
    ci = _case_index(batch, case)
    feeds = make_feeds(batch, [ci])[ri]
    return {local: to_oracle(feeds[_in_name(ci, local)], inp.dtype) for local, inp in case.inputs.items()}


def assert_matches(got: np.ndarray, want, out_dtype: str, tol, exact: bool, what: str):
    want = np.asarray(want)
    assert tuple(got.shape) == tuple(want.shape), f"{what}: shape {tuple(got.shape)}, expected {tuple(want.shape)}"
    exp_np = RESULT_NP_DTYPE[out_dtype]
    assert got.dtype == exp_np, f"{what}: numpy dtype {got.dtype}, expected {np.dtype(exp_np)} for {out_dtype}"
    if out_dtype not in FLOAT_DTYPES:
        want_c = want.astype(exp_np)
        if not np.array_equal(got, want_c):
            bad = np.argwhere(got != want_c)
            i = tuple(bad[0])
            raise AssertionError(f"{what}: {len(bad)}/{got.size} elements differ; first at {i}: "
                                 f"got {got[i]!r}, expected {want_c[i]!r}")
        return
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    if exact:
        # Exact float results (casts, copies) are compared after rounding the oracle to the
        # output dtype, so "exact" means "what the dtype's round-to-nearest-even gives".
        w = to_runtime(w, out_dtype).astype(np.float64)
        rtol, atol = 0.0, 0.0
    else:
        rtol, atol = tol or DEFAULT_TOL[out_dtype]
    nan_mismatch = np.isnan(g) != np.isnan(w)
    err = np.abs(g - w)
    allowed = atol + rtol * np.abs(w)
    bad = nan_mismatch | (np.nan_to_num(err, nan=0.0) > allowed)
    if np.any(bad):
        idx = np.argwhere(bad)
        i = tuple(idx[0])
        j = np.unravel_index(np.nanargmax(np.where(bad, err, -1)), err.shape) if err.size else i
        raise AssertionError(
            f"{what}: {len(idx)}/{g.size} elements outside rtol={rtol} atol={atol}; first at {i}: got {g[i]!r}, "
            f"expected {w[i]!r}; worst at {tuple(j)}: got {g[j]!r}, expected {w[j]!r} (|err|={err[j]:.3g})")


def _torch_inputs(x: Dict[str, np.ndarray]):
    import torch
    return {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in x.items()}


def check(batch: Batch, case: Case, ri: int, mode: str = "compiled", tmp_path_factory=None):
    """The body of every parity test: fetch the case's outputs from the cached batch result
    and compare with the NumPy oracle (and the PyTorch oracle where the case has one)."""
    ci = _case_index(batch, case)
    res = batch_results(batch, mode, tmp_path_factory)[ci]
    if isinstance(res, CaseError):
        pytest.fail(f"[{mode}] {case.id} failed at {res.stage}: {res.message}", pytrace=False)
    got = res[ri]
    x = oracle_inputs(batch, case, ri)
    want = _as_tuple(case.oracle(x))
    dts = case.out_dtypes(len(want))
    assert len(got) == len(want), f"{case.id}: {len(got)} outputs, expected {len(want)}"
    for k, (g, w, dt) in enumerate(zip(got, want, dts)):
        assert_matches(g, w, dt, case.tol, case.exact, f"[{mode}] {case.id} output {k} ({dt}) vs numpy")
    if case.torch is not None and mode == "compiled":
        try:
            import torch  # noqa: F401
        except ImportError:
            return
        tw = _as_tuple(case.torch(_torch_inputs(x)))
        for k, (g, w, dt) in enumerate(zip(got, tw, dts)):
            assert_matches(g, w.detach().numpy(), dt, case.tol, case.exact,
                           f"[{mode}] {case.id} output {k} ({dt}) vs torch")


# ---------------------------------------------------------------------------------------------
# float64 oracles that NumPy lacks
# ---------------------------------------------------------------------------------------------

_erf_vec = np.vectorize(math.erf, otypes=[np.float64])


def np_erf(x):
    return _erf_vec(np.asarray(x, dtype=np.float64))


def np_gelu(x):
    return 0.5 * x * (1.0 + np_erf(x / math.sqrt(2.0)))


def np_fast_gelu(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def np_sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def np_silu(x):
    return x * np_sigmoid(x)


def np_softmax(x, axis):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def np_log_softmax(x, axis):
    m = np.max(x, axis=axis, keepdims=True)
    return x - m - np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))

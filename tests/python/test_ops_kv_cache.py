"""Parity of kv_cache_write (docs/ops.md "KV cache"): y = cache with rows positions[t] (axis -2)
replaced by values[..., t, :]. Oracle: NumPy fancy-index assignment, run over several session
runs so the cache state carries over. Both lowerings are covered: the in-place update of a state
(alias_kv_cache_write: the state's only other reader is its state_assign) and the copying one
(the output is also a graph output / the cache is an input). Plus the reference interpreter,
int32/int64 positions, float16, repeated positions, errors (shapes, dtypes, out-of-range rows).
"""
import json
import os

import numpy as np
import pytest

import dinoml as dml

H, S, D = 3, 16, 5
seq = dml.Dim("T", min=1, max=8, typical=1, buckets=(1, 8))


def _np_write(cache, values, positions):
    out = cache.copy()
    for t, p in enumerate(positions):  # in order: a repeated position keeps the last row
        out[..., p, :] = values[..., t, :]
    return out


def _spec(in_place: bool, dtype="float32", pos_dtype="int64"):
    def fwd(values, positions):
        cache = dml.state("cache", [H, S, D], dtype)
        y = dml.ops.kv_cache_write(cache, values, positions)
        dml.ops.state_assign(cache, y)
        # in place: the state's only other reader is its state_assign; copy: another node reads
        # the state too and must see the value from before the run.
        return {"y": y * 2.0} if in_place else {"y": y, "old": cache * 1.0}

    return dml.trace(fwd, inputs={"values": dml.TensorSpec([H, seq, D], dtype),
                                  "positions": dml.TensorSpec([seq], pos_dtype)},
                     name=f"kv_{'inplace' if in_place else 'copy'}_{dtype}_{pos_dtype}")


@pytest.mark.parametrize("in_place", [True, False])
@pytest.mark.parametrize("dtype,pos_dtype", [("float32", "int64"), ("float32", "int32"), ("float16", "int64")])
def test_kv_cache_write_runs(tmp_path, in_place, dtype, pos_dtype):
    spec = _spec(in_place, dtype, pos_dtype)
    art = dml.compile(spec, target="cpu", out=str(tmp_path / "a"))
    km = json.load(open(os.path.join(art.path, "kernel_manifest.json")))
    sel = [e["selected"] for e in km if e["op"] == "kv_cache_write"]
    assert sel == ["dml_cpu_kv_cache_write." + ("in_place" if in_place else "copy")]
    s = dml.runtime.load(art.path).create_session()
    rng = np.random.default_rng(1)
    npdt = np.float16 if dtype == "float16" else np.float32
    cache = np.zeros((H, S, D), np.float64)
    states = {}
    for positions in ([0, 1, 2, 3, 4], [5], [6], [15, 7, 8, 9, 10, 11, 12, 13], [3, 3], [14]):
        vals = rng.uniform(-1, 1, (H, len(positions), D)).astype(npdt)
        pos = np.array(positions, dtype=pos_dtype)
        want = _np_write(cache, vals.astype(np.float64), positions)
        ref = dml.reference(spec, {"values": vals, "positions": pos}, states=states, return_states=True)
        outs = s.run_numpy({"values": vals, "positions": pos})
        got = outs["y"]
        if not in_place:
            np.testing.assert_array_equal(outs["old"].astype(np.float64), cache)
        scale = 2.0 if in_place else 1.0
        np.testing.assert_array_equal(got.astype(np.float64), scale * want)
        np.testing.assert_array_equal(s.get_state("cache").astype(np.float64), want)
        np.testing.assert_array_equal(np.asarray(ref[0]["y"], np.float64), scale * want)
        states = ref[1]
        cache = want
    # An out-of-range position is an error naming the node; nothing moves.
    with pytest.raises(Exception, match="kv_cache_write.*position 16"):
        s.run_numpy({"values": np.zeros((H, 1, D), npdt), "positions": np.array([S], pos_dtype)})
    np.testing.assert_array_equal(s.get_state("cache").astype(np.float64), cache)


def test_kv_cache_write_on_an_input_cache(tmp_path):
    def fwd(cache, values, positions):
        return dml.ops.kv_cache_write(cache, values, positions)

    spec = dml.trace(fwd, inputs={"cache": dml.TensorSpec([2, 6, 4]), "values": dml.TensorSpec([2, 2, 4]),
                                  "positions": dml.TensorSpec([2], "int64")}, name="kv_input")
    art = dml.compile(spec, target="cpu", out=str(tmp_path / "a"))
    rng = np.random.default_rng(2)
    c = rng.standard_normal((2, 6, 4)).astype(np.float32)
    v = rng.standard_normal((2, 2, 4)).astype(np.float32)
    p = np.array([4, 1], np.int64)
    got = dml.runtime.load(art.path).create_session().run_numpy({"cache": c, "values": v, "positions": p})["output"]
    np.testing.assert_array_equal(got, _np_write(c, v, p))


@pytest.mark.parametrize("shapes,dtypes,match", [
    (([2, 6, 4], [2, 2, 4], [2, 1]), ("float32", "float32", "int64"), "positions .* must be 1-d"),
    (([2, 6, 4], [2, 2, 3], [2]), ("float32", "float32", "int64"), "row size D"),
    (([2, 6, 4], [3, 2, 4], [2]), ("float32", "float32", "int64"), "leading axis 0"),
    (([2, 6, 4], [2, 2, 4], [3]), ("float32", "float32", "int64"), "positions length"),
    (([2, 6, 4], [2, 2, 4], [2]), ("float32", "float16", "int64"), "same dtype"),
    (([2, 6, 4], [2, 2, 4], [2]), ("float32", "float32", "float32"), "int32 or int64"),
    (([6], [2], [2]), ("float32", "float32", "int64"), "rank >= 2"),
])
def test_kv_cache_write_errors(shapes, dtypes, match):
    def fwd(c, v, p):
        return dml.ops.kv_cache_write(c, v, p)

    with pytest.raises(dml.ShapeError, match=match):
        dml.trace(fwd, inputs={n: dml.TensorSpec(s, d) for n, s, d in zip("cvp", shapes, dtypes)}, name="bad")

"""Kernel selection from Python: `dml.compile(profile=True)` measures candidates per bucket, the
plan is reusable and validated, --strict refuses unmeasured nodes, a hand-edited plan makes the
module dispatch on the bucket, and `dinoml diff` shows the changed kernel choices."""
from __future__ import annotations

import copy
import json
import time
from pathlib import Path

import pytest

import dinoml as dml
import mlp as mlp_example  # examples/mlp.py: 2 gemms, buckets batch {1,4,8} x seq {16,64}
from dinoml._ext import ext


def _cli(*args) -> int:
    return int(ext.cli_main([str(a) for a in args]))


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """One default and one profiled compile of the MLP, sharing a private profile cache."""
    d = tmp_path_factory.mktemp("profile")
    spec = mlp_example.build_spec()
    cache = d / "profile.sqlite"
    default = dml.compile(spec, target="cpu", out=str(d / "default"))
    t0 = time.perf_counter()
    profiled = dml.compile(spec, target="cpu", out=str(d / "profiled"), profile=True, profile_cache=str(cache),
                           progress=False)
    first = time.perf_counter() - t0
    return {"dir": d, "spec": spec, "cache": cache, "default": default, "profiled": profiled, "first_s": first}


def test_plan_schema_and_manifest(work):
    art = work["profiled"]
    assert art.kernel_selection == "profiled"
    plan = art.execution_plan
    assert plan["schema_version"] == 1 and plan["model"] == "mlp"
    assert {"cpu_model", "isa", "cores", "kernel_lib_sha256", "key"} <= set(plan["hardware"])
    assert len(plan["buckets"]) == 6
    gemms = [n for n in plan["nodes"] if n["family"] == "gemm"]
    assert len(gemms) == 2
    for n in plan["nodes"]:
        assert len(n["buckets"]) == 6
        for b in n["buckets"]:
            assert b["winner"] in n["candidates"]
            assert [t["candidate"] for t in b["timings"]] == n["candidates"]
            for t in b["timings"]:
                assert 0 < t["ci_low_s"] <= t["median_s"] <= t["ci_high_s"] and t["reps"] >= 3
            assert b["reason"]
            assert set(b["dims"]) == {"batch", "seq"}
    km = {e["node"]: e for e in art.kernel_manifest}
    for n in plan["nodes"]:
        per = km[n["node"]]["selected_per_bucket"]
        assert [p["kernel"] for p in per] == [b["winner"] for b in n["buckets"]]
        assert all(p["measured"] for p in per)
    # The default compile names its choice and why: nothing silent.
    for e in work["default"].kernel_manifest:
        if e.get("tunable"):
            assert e["reason"] == "default (not profiled)"
            assert e["selected"] == e["candidates"][0]


def test_profiled_artifact_matches_reference(work):
    assert _cli("validate", work["profiled"].path) == 0


def test_second_profile_hits_the_cache(work):
    t0 = time.perf_counter()
    again = dml.compile(work["spec"], target="cpu", out=str(work["dir"] / "again"), profile=True,
                        profile_cache=str(work["cache"]), progress=False)
    second = time.perf_counter() - t0
    p = again.profile
    assert p["measurements"] == 0 and p["cache_hits"] == work["profiled"].profile["measurements"]
    assert not p["built_bootstrap"]
    assert p["seconds"] < 0.5, p
    print(f"profile compile: first {work['first_s']:.2f} s, second {second:.2f} s (profiling {p['seconds']:.3f} s)")
    # Same measurements (now marked cached), same choices.
    def picks(art):
        return [[(b["kernel"], [t["median_s"] for t in b["timings"]]) for b in e["selected_per_bucket"]]
                for e in art.kernel_manifest if e.get("tunable")]
    assert picks(again) == picks(work["profiled"])
    assert all(t["cached"] for n in again.execution_plan["nodes"] for b in n["buckets"] for t in b["timings"])


def test_strict_lists_unmeasured_nodes(work, tmp_path):
    with pytest.raises(dml.CompileError, match=r"tunable node\(s\) have no measured kernel choice: .*gemm"):
        dml.compile(work["spec"], target="cpu", out=str(tmp_path / "a"), strict=True)
    # A measured plan satisfies --strict.
    plan = Path(work["profiled"].path) / "execution_plan.json"
    art = dml.compile(work["spec"], target="cpu", out=str(tmp_path / "b"), strict=True, execution_plan=str(plan))
    assert art.kernel_selection == "execution_plan"


def test_plan_reuse_rejects_unknown_node_and_candidate(work, tmp_path):
    plan = work["profiled"].execution_plan
    bad = copy.deepcopy(plan)
    bad["nodes"][0]["node"] = "nope"
    (tmp_path / "bad_node.json").write_text(json.dumps(bad))
    with pytest.raises(dml.CompileError, match="node 'nope' is not a tunable node"):
        dml.compile(work["spec"], out=str(tmp_path / "x"), execution_plan=str(tmp_path / "bad_node.json"))
    bad = copy.deepcopy(plan)
    bad["nodes"][0]["buckets"][2]["winner"] = "dml.gemm.imaginary"
    (tmp_path / "bad_cand.json").write_text(json.dumps(bad))
    with pytest.raises(dml.CompileError, match="unknown candidate 'dml.gemm.imaginary'"):
        dml.compile(work["spec"], out=str(tmp_path / "y"), execution_plan=str(tmp_path / "bad_cand.json"))


def test_hand_edited_plan_dispatches_per_bucket(work, tmp_path):
    plan = copy.deepcopy(work["profiled"].execution_plan)
    node = next(n for n in plan["nodes"] if n["family"] == "gemm")
    cands = node["candidates"]
    for b in node["buckets"]:  # force different winners: serial tiles for small buckets, the default else
        b["winner"] = cands[-1] if b["bucket"] % 2 == 0 else cands[0]
        b.pop("timings")
        b["reason"] = "hand-edited"
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    art = dml.compile(work["spec"], out=str(tmp_path / "art"), execution_plan=str(tmp_path / "plan.json"))
    src = (Path(art.path) / "debug" / "module.cpp").read_text()
    assert "switch (b) {  // kernel chosen per shape bucket" in src
    entry = next(e for e in art.kernel_manifest if e["node"] == node["node"])
    assert entry["selected"] == "per bucket"
    assert [p["kernel"] for p in entry["selected_per_bucket"]] == [b["winner"] for b in node["buckets"]]
    assert not entry["selected_per_bucket"][0]["measured"]
    assert _cli("validate", art.path) == 0  # every bucket's upper bound + the minimum dims
    with pytest.raises(dml.CompileError, match="no measured kernel choice: " + node["node"]):
        dml.compile(work["spec"], out=str(tmp_path / "s"), execution_plan=str(tmp_path / "plan.json"), strict=True)


def test_diff_shows_kernel_choices(work, capfd):
    a, b = work["default"].path, work["profiled"].path
    capfd.readouterr()
    assert _cli("diff", a, a) == 0
    assert "identical" in capfd.readouterr().out
    rc = _cli("diff", "--json", a, b)
    report = json.loads(capfd.readouterr().out)
    assert rc == 1 and not report["identical"]
    diffs = report["differences"]
    assert any("kernel_selection" in line for line in diffs["config"])
    changed = [ln for ln in diffs.get("kernels", [])]
    plan = work["profiled"].execution_plan
    moved = [n["node"] for n in plan["nodes"] if any(bk["winner"] != n["candidates"][0] for bk in n["buckets"])]
    for node in moved:  # every node the profile moved off the default shows up, bucket by bucket
        assert any(f"'{node}'" in ln and "bucket" in ln for ln in changed), (node, changed)
    assert "nodes" not in diffs and "constants" not in diffs  # same graph
    assert _cli("diff", a, b) == 1
    out = capfd.readouterr().out
    assert out.startswith("--- A ") and "config:" in out


def test_inspect_shows_winners_and_times(work, capfd):
    capfd.readouterr()
    assert _cli("inspect", work["profiled"].path) == 0
    out = capfd.readouterr().out
    assert "kernel selection: profiled" in out
    assert "bucket 5" in out and " us" in out

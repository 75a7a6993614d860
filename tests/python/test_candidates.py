"""GEMM kernel candidates beyond the own kernels (issue 3): constant weights packed once at module
init (`dml.gemm.prepacked`, the default for a constant b), and the vendor providers oneDNN and
OpenBLAS as profiler candidates. A provider is linked into module.so and shipped in lib/ only when
chosen; its system library is named in the manifest and checked before module.so is opened."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import dinoml as dml
from dinoml._ext import ext


class Linear2(dml.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = dml.nn.Linear(48, 96)
        self.fc2 = dml.nn.Linear(96, 40)

    def forward(self, x):
        return self.fc2(dml.ops.relu(self.fc1(x)))


def _lin2_weights():
    rng = np.random.default_rng(7)
    w = {"fc1.weight": rng.standard_normal((96, 48)) * 0.2, "fc1.bias": rng.standard_normal(96),
         "fc2.weight": rng.standard_normal((40, 96)) * 0.2, "fc2.bias": rng.standard_normal(40)}
    return {k: v.astype(np.float32) for k, v in w.items()}


def _spec():
    batch = dml.Dim("batch", min=1, max=16, buckets=(4, 16))
    return dml.trace(Linear2(), inputs={"x": dml.TensorSpec([batch, 48], "float32")}, constants=_lin2_weights(),
                     name="lin2")


def _gemm_entries(art):
    return [e for e in art.kernel_manifest if e.get("family") == "gemm"]


def test_constant_weights_are_packed_at_init_by_default(tmp_path):
    art = dml.compile(_spec(), target="cpu", out=str(tmp_path / "a"))
    entries = _gemm_entries(art)
    assert len(entries) == 2
    for e in entries:
        assert e["selected"] == "dml.gemm.prepacked" and e["candidates"][0] == "dml.gemm.prepacked"
    src = (Path(art.path) / "debug" / "module.cpp").read_text()
    assert src.count("dml_cpu_gemm_pack_b(") == 2 and "dml_cpu_gemm_prepacked(" in src
    assert ext.cli_main(["validate", art.path]) == 0


@pytest.mark.parametrize("winner,lib,syslib", [("onednn.matmul", "libdinoml_cpu_onednn.so", "libdnnl.so.2"),
                                               ("openblas.sgemm", "libdinoml_cpu_openblas.so", "libopenblas.so.0")])
def test_provider_candidate_is_linked_shipped_and_checked(tmp_path, winner, lib, syslib):
    default = dml.compile(_spec(), target="cpu", out=str(tmp_path / "default"))
    assert not (Path(default.path) / "lib" / lib).exists()
    assert json.loads((Path(default.path) / "manifest.json").read_text())["system_libraries"] == []
    if any(winner not in e["candidates"] for e in _gemm_entries(default)):
        pytest.skip(f"{winner} is not a candidate in this build (its provider library was not built)")
    # A real profiled plan, with the provider forced as every bucket's winner.
    prof = dml.compile(_spec(), target="cpu", out=str(tmp_path / "prof"), profile=True,
                       profile_cache=str(tmp_path / "p.sqlite"), progress=False)
    plan = prof.execution_plan
    for n in plan["nodes"]:
        assert winner in n["candidates"]  # the profiler timed the provider too
        for b in n["buckets"]:
            b["winner"] = winner
            b["reason"] = "test: forced"
            b.pop("timings", None)
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    art = dml.compile(_spec(), target="cpu", out=str(tmp_path / "forced"), execution_plan=str(tmp_path / "plan.json"))
    d = Path(art.path)
    assert (d / "lib" / lib).exists()
    manifest = json.loads((d / "manifest.json").read_text())
    assert manifest["system_libraries"] == [syslib] and f"lib/{lib}" in manifest["files"]
    assert all(e["selected"] == winner for e in _gemm_entries(art))
    assert ext.cli_main(["validate", art.path]) == 0  # runs every bucket against the reference


def _tamper_manifest(src: Path, dst: Path, libs):
    import shutil
    shutil.copytree(src, dst)
    m = json.loads((dst / "manifest.json").read_text())
    m["system_libraries"] = libs
    (dst / "manifest.json").write_text(json.dumps(m))


def test_manifest_system_libraries_are_checked(tmp_path):
    art = dml.compile(_spec(), target="cpu", out=str(tmp_path / "a"))
    _tamper_manifest(Path(art.path), tmp_path / "missing", ["libdinoml_no_such_vendor.so.7"])
    with pytest.raises(dml.ArtifactError, match=r"need the system library libdinoml_no_such_vendor\.so\.7"):
        dml.runtime.load(str(tmp_path / "missing"))
    _tamper_manifest(Path(art.path), tmp_path / "path", ["/etc/passwd"])
    with pytest.raises(dml.ArtifactError, match=r"system_libraries\[0\].*soname"):
        dml.runtime.load(str(tmp_path / "path"))


# ---- conv: packed-weight variants as candidates -------------------------------------------------

class ConvNet(dml.Module):
    def __init__(self):
        super().__init__()
        self.c1 = dml.nn.Conv2d(16, 32, 3, padding=1)     # F(4x4) fits (C <= 128)
        self.c2 = dml.nn.Conv2d(32, 32, 3, padding=1)     # F(4x4) fits
        self.c3 = dml.nn.Conv2d(32, 16, 3, stride=2, padding=1)  # GEMM panels only

    def forward(self, x):
        return self.c3(dml.ops.relu(self.c2(dml.ops.relu(self.c1(x)))))


def _conv_spec():
    rng = np.random.default_rng(3)
    w = {}
    for name, (o, c) in {"c1": (32, 16), "c2": (32, 32), "c3": (16, 32)}.items():
        w[f"{name}.weight"] = (rng.standard_normal((o, c, 3, 3)) * (1.0 / np.sqrt(9 * c))).astype(np.float32)
        w[f"{name}.bias"] = rng.standard_normal(o).astype(np.float32)
    batch = dml.Dim("batch", min=1, max=2, buckets=(2,))
    return dml.trace(ConvNet(), inputs={"x": dml.TensorSpec([batch, 16, 12, 12], "float32")}, constants=w,
                     name="convnet")


def test_conv_variants_are_candidates_and_each_runs(tmp_path):
    spec = _conv_spec()
    default = dml.compile(spec, target="cpu", out=str(tmp_path / "default"))
    convs = {e["node"]: e for e in default.kernel_manifest if e.get("family") == "conv"}
    assert len(convs) == 3
    for e in convs.values():
        assert e["selected"] == "dml.conv2d.prepacked" and e["reason"] == "default (not profiled)"
    by_count = sorted(len(e["candidates"]) for e in convs.values())
    assert by_count == [3, 5, 5], by_count  # the strided conv offers no Winograd variant
    prof = dml.compile(spec, target="cpu", out=str(tmp_path / "prof"), profile=True,
                       profile_cache=str(tmp_path / "p.sqlite"), progress=False)
    plan = prof.execution_plan
    conv_nodes = [n for n in plan["nodes"] if n["family"] == "conv"]
    assert len(conv_nodes) == 3
    for variant in ("dml.conv2d.implicit_gemm.prepacked", "dml.conv2d.direct_cv.prepacked",
                    "dml.conv2d.winograd_f2.prepacked", "dml.conv2d.winograd_f4.prepacked"):
        forced = json.loads(json.dumps(plan))
        for n in forced["nodes"]:
            if n["family"] != "conv" or variant not in n["candidates"]:
                continue
            for b in n["buckets"]:
                b["winner"], b["reason"] = variant, "test: forced"
                b.pop("timings", None)
        (tmp_path / "plan.json").write_text(json.dumps(forced))
        art = dml.compile(spec, target="cpu", out=str(tmp_path / variant), execution_plan=str(tmp_path / "plan.json"))
        src = (Path(art.path) / "debug" / "module.cpp").read_text()
        v = {"implicit_gemm": "0", "direct_cv": "1", "winograd_f2": "2", "winograd_f4": "4"}[variant.split(".")[2]]
        assert f"dml_cpu_conv2d_pack_w_variant(0, &ws, constants + " in src and f", p, {v})" in src
        assert ext.cli_main(["validate", art.path]) == 0  # against the reference interpreter


class SmallImageConv(dml.Module):
    def __init__(self):
        super().__init__()
        self.c = dml.nn.Conv2d(192, 192, 3, padding=1)  # O·C > 128·256: F(2x2), 16 tiles on a 7×7 image

    def forward(self, x):
        return dml.ops.relu(self.c(x))


def test_small_image_conv_takes_winograd_in_batch_buckets(tmp_path):
    # Unprofiled, the library's rule packs a small static image in the channel-vectorised form (batch
    # 1); a bucket of batch >= 2 takes Winograd F(2x2) on panels spanning the images instead, and the
    # module dispatches on the bucket. Both buckets match the reference interpreter.
    rng = np.random.default_rng(5)
    w = {"c.weight": (rng.standard_normal((192, 192, 3, 3)) / np.sqrt(9 * 192)).astype(np.float32),
         "c.bias": rng.standard_normal(192).astype(np.float32)}
    batch = dml.Dim("batch", min=1, max=5, buckets=(1, 5))
    spec = dml.trace(SmallImageConv(), inputs={"x": dml.TensorSpec([batch, 192, 7, 7], "float32")}, constants=w,
                     name="small_image_conv")
    art = dml.compile(spec, target="cpu", out=str(tmp_path / "a"))
    (e,) = [e for e in art.kernel_manifest if e.get("family") == "conv"]
    per = {b["bucket"]: b for b in e["selected_per_bucket"]}
    assert per[0]["kernel"] == "dml.conv2d.prepacked" and per[0]["reason"] == "default (not profiled)"
    assert per[1]["kernel"] == "dml.conv2d.winograd_f2.prepacked"
    assert per[1]["reason"].startswith("default (not profiled): batch >= 2") and not per[1]["measured"]
    src = (Path(art.path) / "debug" / "module.cpp").read_text()
    assert "switch (b)" in src and ", p, 2)" in src and ", p, -1)" in src
    assert ext.cli_main(["validate", art.path]) == 0  # every bucket's edge against the reference interpreter


# ---- native bf16 GEMM (AVX512_BF16) as a candidate of bf16 graphs ----------------------------

class Bf16Mlp(dml.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = dml.nn.Linear(64, 96, dtype="bfloat16")
        self.fc2 = dml.nn.Linear(96, 40, dtype="bfloat16")

    def forward(self, x):
        return self.fc2(dml.ops.relu(self.fc1(x)))


def _bf16_spec():
    batch = dml.Dim("batch", min=1, max=16, buckets=(4, 16))
    rng = np.random.default_rng(11)
    w = {"fc1.weight": rng.standard_normal((96, 64)) * 0.2, "fc1.bias": rng.standard_normal(96),
         "fc2.weight": rng.standard_normal((40, 96)) * 0.2, "fc2.bias": rng.standard_normal(40)}
    w = {k: v.astype(np.float32) for k, v in w.items()}
    return dml.trace(Bf16Mlp(), inputs={"x": dml.TensorSpec([batch, 64], "bfloat16")}, constants=w, name="bf16mlp")


def test_bf16_native_gemm_is_a_candidate_of_bf16_graphs_only(tmp_path, monkeypatch):
    default = dml.compile(_bf16_spec(), target="cpu", out=str(tmp_path / "default"))
    entries = _gemm_entries(default)
    assert len(entries) == 2
    for e in entries:  # not the default: an artifact that selects it requires avx512bf16
        assert e["selected"] == "dml.gemm.prepacked"
    f32 = dml.compile(_spec(), target="cpu", out=str(tmp_path / "f32"))
    assert all("dml.gemm.bf16_native.prepacked" not in e["candidates"] for e in _gemm_entries(f32))
    if any("dml.gemm.bf16_native.prepacked" not in e["candidates"] for e in entries):
        pytest.skip("this CPU lacks AVX512_BF16: the native bf16 GEMM is not offered "
                    "(its kernel tests run the refusal path: LowpGemmUnsupported.*)")
    prof = dml.compile(_bf16_spec(), target="cpu", out=str(tmp_path / "prof"), profile=True,
                       profile_cache=str(tmp_path / "p.sqlite"), progress=False)
    plan = prof.execution_plan
    for n in plan["nodes"]:
        if n["family"] != "gemm":
            continue
        assert "dml.gemm.bf16_native.prepacked" in n["candidates"]  # timed by the profiler
        for b in n["buckets"]:
            b["winner"], b["reason"] = "dml.gemm.bf16_native.prepacked", "test: forced"
            b.pop("timings", None)
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    art = dml.compile(_bf16_spec(), target="cpu", out=str(tmp_path / "forced"),
                      execution_plan=str(tmp_path / "plan.json"))
    assert all(e["selected"] == "dml.gemm.bf16_native.prepacked" for e in _gemm_entries(art))
    src = (Path(art.path) / "debug" / "module.cpp").read_text()
    assert src.count("dml_cpu_gemm_bf16_pack_b(") == 2 and "dml_cpu_gemm_bf16_prepacked(" in src
    manifest = json.loads((Path(art.path) / "manifest.json").read_text())
    assert "avx512bf16" in json.dumps(manifest)  # the artifact says what it needs
    assert ext.cli_main(["validate", art.path]) == 0  # every bucket against the reference interpreter
    # On a CPU without the ISA (simulated) the artifact is refused at load, naming it.
    monkeypatch.setenv("DINOML_CPU_DISABLE_ISA", "avx512bf16")
    with pytest.raises(dml.ArtifactError, match="avx512bf16"):
        dml.runtime.load(art.path)


# ---- fp32_matmul_precision="bf16": float32 GEMMs multiplied in bfloat16 ---------------------

def _round_bf16(x):
    """float32 -> nearest bfloat16 (ties to even), returned as float32: the oracle's rounding."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def _lin2_bf16_oracle(x, w):
    h = np.maximum(_round_bf16(x).astype(np.float64) @ _round_bf16(w["fc1.weight"]).T.astype(np.float64)
                   + w["fc1.bias"], 0.0).astype(np.float32)
    return (_round_bf16(h).astype(np.float64) @ _round_bf16(w["fc2.weight"]).T.astype(np.float64)
            + w["fc2.bias"]).astype(np.float32)


def test_fp32_matmul_precision_bf16_selects_the_bf16_math_gemm(tmp_path):
    highest = dml.compile(_spec(), target="cpu", out=str(tmp_path / "highest"))
    assert all("dml.gemm.bf16_math.prepacked" not in e["candidates"] for e in _gemm_entries(highest))
    assert json.loads((Path(highest.path) / "manifest.json").read_text()).get("isa") != "avx512bf16"
    try:
        art = dml.compile(_spec(), target="cpu", out=str(tmp_path / "bf16"), fp32_matmul_precision="bf16")
    except dml.CompileError as e:
        assert "AVX512_BF16" in str(e)
        pytest.skip("this CPU lacks AVX512_BF16: fp32_matmul_precision bf16 is refused (checked)")
    entries = _gemm_entries(art)
    assert len(entries) == 2
    for e in entries:
        assert e["selected"] == "dml.gemm.bf16_math.prepacked" and e["candidates"][0] == e["selected"]
    src = (Path(art.path) / "debug" / "module.cpp").read_text()
    assert src.count("dml_cpu_gemm_bf16_pack_b(") == 2 and "dml_cpu_gemm_pack_b(" not in src
    assert "avx512bf16" in (Path(art.path) / "manifest.json").read_text()
    rng = np.random.default_rng(3)
    w = _lin2_weights()
    hi = dml.runtime.load(highest.path).create_session()
    lo = dml.runtime.load(art.path).create_session()
    for m in (1, 4, 7, 16):
        x = rng.standard_normal((m, 48)).astype(np.float32)
        got = next(iter(lo.run_numpy(x=x).values()))
        exact = next(iter(hi.run_numpy(x=x).values()))
        # Products of bf16-rounded operands, accumulated in float32: the oracle rounds the same way.
        np.testing.assert_allclose(got, _lin2_bf16_oracle(x, w), rtol=2e-3, atol=2e-3)
        # ... and stays within bf16 precision of the float32 model, but is not bit-identical to it.
        np.testing.assert_allclose(got, exact, rtol=3e-2, atol=3e-2)
        assert not np.array_equal(got, exact)
    cfg = json.loads((Path(art.path) / "compile_config.json").read_text())
    assert cfg["fp32_matmul_precision"] == "bf16"


def test_fp32_matmul_precision_bf16_artifact_is_refused_without_the_isa(tmp_path, monkeypatch):
    try:
        art = dml.compile(_spec(), target="cpu", out=str(tmp_path / "bf16"), fp32_matmul_precision="bf16")
    except dml.CompileError:
        pytest.skip("this CPU lacks AVX512_BF16 (the compile refusal is checked above)")
    monkeypatch.setenv("DINOML_CPU_DISABLE_ISA", "avx512bf16")
    with pytest.raises(dml.ArtifactError, match="avx512bf16"):
        dml.runtime.load(art.path)
    # ... and compiling for it on such a CPU is refused before anything is built.
    with pytest.raises(dml.CompileError, match="AVX512_BF16"):
        dml.compile(_spec(), target="cpu", out=str(tmp_path / "again"), fp32_matmul_precision="bf16")


def test_fp32_matmul_precision_errors(tmp_path):
    with pytest.raises(dml.CompileError, match="fp32_matmul_precision 'tf32': use highest or bf16"):
        dml.compile(_spec(), target="cpu", out=str(tmp_path / "a"), fp32_matmul_precision="tf32")
    with pytest.raises(dml.CompileError, match="target cpu option"):
        dml.compile(_spec(), target="cuda", out=str(tmp_path / "b"), fp32_matmul_precision="bf16")

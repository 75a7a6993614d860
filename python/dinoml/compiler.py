"""`dinoml.compile`: Spec -> artifact directory, through the C++ `dinoml::compile`."""
from __future__ import annotations

import json
import os
import tempfile
from typing import Optional, Union

from ._ext import ext
from .spec import Spec


class Artifact:
    """A compiled artifact directory (see docs/architecture.md for its layout)."""

    def __init__(self, path: str, result: Optional[dict] = None):
        self.path = os.fspath(path)
        self._result = result or {}

    def _json(self, name: str):
        with open(os.path.join(self.path, name), encoding="utf-8") as f:
            return json.load(f)

    @property
    def manifest(self) -> dict:
        return self._json("manifest.json")

    @property
    def metadata(self) -> dict:
        return self._json("metadata.json")

    @property
    def kernel_manifest(self):
        return self._json("kernel_manifest.json")

    @property
    def graph_hash(self) -> str:
        return self._result.get("graph_hash") or self.manifest["graph_hash"]

    @property
    def cache_hit(self) -> Optional[bool]:
        return self._result.get("cache_hit")

    @property
    def seconds(self) -> Optional[float]:
        return self._result.get("seconds")

    @property
    def kernel_selection(self) -> Optional[str]:
        """"default", "profiled" or "execution_plan" (how kernels were chosen)."""
        return self._result.get("kernel_selection")

    @property
    def profile(self) -> Optional[dict]:
        """With profile=True: {measurements, cache_hits, built_bootstrap, seconds, cache_path}."""
        r = self._result.get("profile")
        return json.loads(r) if r else None

    @property
    def execution_plan(self) -> Optional[dict]:
        """execution_plan.json of a profiled (or plan-reusing) artifact, else None."""
        p = os.path.join(self.path, "execution_plan.json")
        return self._json("execution_plan.json") if os.path.exists(p) else None

    @property
    def pass_report(self):
        r = self._result.get("pass_report")
        return json.loads(r) if r else None

    def load(self):
        """Loads the artifact with the runtime (dinoml.runtime.load)."""
        from . import runtime
        return runtime.load(self.path)

    def __fspath__(self):
        return self.path

    def __repr__(self):
        return f"Artifact({self.path!r})"


def compile(spec: Union[Spec, str, os.PathLike], target: str = "cpu", out: Optional[str] = None,  # noqa: A001
            dump_passes: bool = False, fuse: bool = True, cache_dir: Optional[str] = None, use_cache: bool = True,
            verbose: bool = False, profile: bool = False, execution_plan: Optional[str] = None,
            strict: bool = False, profile_cache: Optional[str] = None, use_profile_cache: bool = True,
            progress: bool = True, arch: Optional[str] = None, tf32: bool = True,
            fp32_matmul_precision: str = "highest", weights: str = "embedded",
            tensor_parallel: int = 1) -> Artifact:
    """Compiles `spec` (a Spec, or the path of a .dinoir.json) for `target` into the directory
    `out` (created or replaced; default: a new temporary directory). Errors raise CompileError
    with the compiler's message. The GIL is released while compiling.

    Kernel selection: `profile=True` times every kernel candidate of every tunable node per shape
    bucket and keeps the fastest (execution_plan.json in the artifact; timings cached in
    `profile_cache`, default $DINOML_CACHE_DIR/profile.sqlite); `execution_plan=FILE` reuses a
    plan; `strict=True` fails when a tunable node has no measured choice.

    target="cpu": `fp32_matmul_precision="bf16"` lets float32 GEMMs with a constant weight round
    both operands to bfloat16 and multiply on AMX / AVX512_BF16 with float32 accumulation and output
    (the CPU's analogue of TF32: several times faster on AMX, about three significant digits; the
    default "highest" keeps float32 products). Needs AVX512_BF16 on the compiling machine.

    `weights`: "embedded" (default; constants in constants.bin, constant folding may consume some, which
    then cannot be replaced at run time), "swappable" (no folding: every constant can be replaced with
    Module.set_constant / load_weights) or "external" (as swappable, and no constants.bin: load the
    artifact with dinoml.runtime.load(dir, weights="model.safetensors")). docs/deploy.md.

    `tensor_parallel=N` (N > 1, target cpu): shards the model over N ranks (column/row-parallel GEMMs,
    attention by heads, embedding and LM head by vocabulary, all_reduce / all_gather between them);
    the artifact holds one module and each rank's constants. Run it with
    dinoml.runtime.load_group(dir).

    target="cuda": `arch` is "sm_80", "sm_86" or "sm_90a" (default "sm_90a"); `tf32=False` keeps
    float32 GEMMs exact (no TF32 tensor cores). Needs nvcc and a DinoML build with the CUDA kernel
    library; the artifact runs on a GPU of that arch (docs/architecture.md, "CUDA target").
    target="rocm": `arch` is "gfx90a" or "gfx1030" (gfx1100 needs a newer ROCm than Debian's); needs
    hipcc and the ROCm kernel library of this build. Compiled and checked only: nothing has been run
    on AMD hardware (docs/targets.md)."""
    if isinstance(spec, (str, os.PathLike)):
        spec = Spec.load(spec)
    if not isinstance(spec, Spec):
        raise TypeError(f"dinoml.compile expects a Spec (from dml.trace) or a .dinoir.json path, got "
                        f"{type(spec).__name__}")
    if out is None:
        out = tempfile.mkdtemp(prefix=f"dinoml-{spec.name}-")
    out = os.path.abspath(os.fspath(out))
    r = ext.compile(spec.graph, target=target, out_dir=out, dump_passes=dump_passes, fuse=fuse,
                    cache_dir=cache_dir or "", use_cache=use_cache, verbose=verbose, profile=profile,
                    execution_plan=os.fspath(execution_plan) if execution_plan else "", strict=strict,
                    profile_cache=os.fspath(profile_cache) if profile_cache else "",
                    use_profile_cache=use_profile_cache, progress=progress, arch=arch or "", allow_tf32=tf32,
                    fp32_matmul_precision=fp32_matmul_precision, weights=weights,
                    tensor_parallel=int(tensor_parallel))
    return Artifact(r["artifact_dir"] or out, r)

"""`python -m dinoml.cli`: the `dinoml` command from Python.

`compile MODEL.py|MODEL.gguf|MODEL.pt2|MODEL.dinoir.json --target cpu --out DIR [--dump-passes]` runs
here (a .py model file defines `build_spec()` returning a Spec; a .gguf decoder LLM is built by
dinoml.models.decoder from its metadata; a .pt2 is a `torch.export.save`d program, converted by
dinoml.frontends.torch), as do `generate`, `chat`, `serve` (dinoml.serve) and
the op benchmarks; every other subcommand (inspect, run,
validate, benchmark, ops, ...) is the C++ CLI itself, called in-process through the extension.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from typing import List, Optional

from ._ext import ext
from .errors import CompileError, IrError, ShapeError, TraceError
from .spec import Spec


def load_model_file(path: str, **model_args) -> Spec:
    """Imports MODEL.py (its `if __name__ == "__main__"` block does not run) and calls
    build_spec(**model_args) (e.g. gguf="model.gguf" from `--gguf`)."""
    path = os.path.abspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"model file '{path}' does not exist")
    name = "_dinoml_model_" + os.path.splitext(os.path.basename(path))[0].replace("-", "_")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(path))  # so the model can import its neighbours
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(os.path.dirname(path))
    build = getattr(module, "build_spec", None)
    if not callable(build):
        raise ValueError(f"model file '{path}' must define build_spec() returning a dinoml Spec")
    if model_args:
        import inspect
        params = inspect.signature(build).parameters
        takes_any = any(p.kind == p.VAR_KEYWORD for p in params.values())
        unknown = sorted(k for k in model_args if k not in params and not takes_any)
        if unknown:
            raise ValueError(f"{path}: build_spec() takes no argument(s) {unknown} (from --gguf / --model-arg); "
                             f"its parameters: {list(params) or 'none'}")
    result = build(**model_args)
    if not isinstance(result, Spec):
        raise ValueError(f"{path}: build_spec() returned {type(result).__name__}, expected a dinoml Spec")
    return result


GGUF_MODEL_ARGS = ("ctx", "max_seq", "policy", "name", "slots", "kv_dtype")


def load_gguf_model(path: str, **model_args) -> Spec:
    """A decoder LLM from a GGUF file (dinoml.models.decoder.build_spec): --model-arg ctx=N,
    max_seq=M, policy=auto|keep|dequantize, name=NAME, slots=S (KV caches of S sequences batched in
    one run), kv_dtype=float32|float16|bfloat16 (f32|f16|bf16: the KV cache's dtype)."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"model file '{path}' does not exist")
    unknown = sorted(k for k in model_args if k not in GGUF_MODEL_ARGS)
    if unknown:
        raise ValueError(f"{path}: a GGUF model takes --model-arg {', '.join(GGUF_MODEL_ARGS)}; not {unknown}")
    from .models import build_spec
    return build_spec(path, **model_args)


def link_tokenizer(out: str, gguf: str) -> None:
    """OUT/tokenizer.gguf: the model file's vocabulary as a vocab-only GGUF file (its `general.*` and
    `tokenizer.*` keys, no tensors), so `dinoml generate OUT --prompt`, `dinoml chat OUT` and
    `dinoml serve OUT` find the tokenizer and chat template without --gguf, and the artifact stays
    self-contained when it is copied elsewhere. A file without tokenizer keys gets none."""
    from . import gguf as gguf_file
    info = gguf_file.read(gguf)
    md, types = info["metadata"], info["metadata_types"]
    keys = [k for k in md if k.startswith("tokenizer.")]
    dest = os.path.join(out, "tokenizer.gguf")
    if os.path.lexists(dest):
        os.remove(dest)
    if not keys:
        return
    keys = [k for k in md if k.startswith("general.") and k != "general.file_type"] + keys
    gguf_file.write(dest, [(k, types[k], md[k]) for k in keys], [])


def load_exported_program(path: str, dim_args: List[str]) -> Spec:
    """A torch.export.save'd program -> Spec (imports torch and the PyTorch front end)."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"model file '{path}' does not exist")
    from .dims import Dim
    dims = {}
    for kv in dim_args:  # the ONNX importer's syntax and parser: name=value or name=min:max[:buckets][:%divisor]
        k = kv.partition("=")[0]
        d = Dim._wrap(ext.parse_dim_spec(kv))
        dims[k] = d.min if d.min == d.max else d
    try:
        import torch
    except ImportError as e:
        raise ValueError(f"compiling a .pt2 needs PyTorch in this Python ({e}): pip install torch") from e
    from .frontends.torch import from_exported_program
    ep = torch.export.load(path)
    name = os.path.splitext(os.path.basename(path))[0].replace("-", "_").replace(".", "_")
    return from_exported_program(ep, name=name, dims=dims)


def _compile(argv: List[str]) -> int:
    p = argparse.ArgumentParser(prog="dinoml compile", description="Compile a model into an artifact directory.")
    p.add_argument("model", help="MODEL.py (defining build_spec()), MODEL.gguf (a decoder LLM: dinoml.models), "
                   "MODEL.pt2 (torch.export.save) or MODEL.dinoir.json")
    p.add_argument("--target", default="cpu")
    p.add_argument("--out", "-o", required=True, help="artifact directory (created or replaced)")
    p.add_argument("--dump-passes", action="store_true", help="write debug/passes/NN_<pass>.dinoir.json")
    p.add_argument("--no-cache", action="store_true", help="do not use the compile cache")
    p.add_argument("--no-fuse", action="store_true", help="skip the fusion passes")
    p.add_argument("--verbose", "-v", action="store_true")
    p.add_argument("--profile", action="store_true",
                   help="time every kernel candidate per shape bucket and keep the fastest")
    p.add_argument("--execution-plan", default=None, help="reuse the kernel choices of this execution_plan.json")
    p.add_argument("--strict", action="store_true", help="fail when a tunable node has no measured kernel choice")
    p.add_argument("--arch", default=None, help="target cuda: sm_80, sm_86 or sm_90a (default sm_90a); "
                   "target rocm: gfx90a, gfx1030 or gfx1100 (required)")
    p.add_argument("--no-tf32", action="store_true", help="target cuda: float32 GEMMs without TF32")
    p.add_argument("--fp32-matmul-precision", choices=("highest", "bf16"), default="highest",
                   help="target cpu: bf16 lets float32 GEMMs with constant weights multiply in bfloat16 "
                        "(AMX / AVX512_BF16, fp32 accumulation)")
    p.add_argument("--weights", choices=("embedded", "swappable", "external"), default="embedded",
                   help="embedded: constants.bin, constant folding allowed; swappable: no folding, every constant "
                        "replaceable at run time; external: no constants.bin, load with a safetensors file")
    p.add_argument("--tensor-parallel", type=int, default=1, metavar="N",
                   help="shard the model over N ranks (one artifact, each rank's constants; run it with "
                        "dinoml.runtime.load_group)")
    p.add_argument("--gguf", default=None, help="MODEL.py: passed as build_spec(gguf=FILE) (examples/llama/model.py)")
    p.add_argument("--model-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="MODEL.py: passed as build_spec(KEY=VALUE); ints stay ints (repeatable); MODEL.gguf: "
                        "ctx=N (KV cache positions), max_seq=M (tokens per run), policy, name, slots=S (sequences "
                        "decoded together), kv_dtype=f32|f16|bf16 (KV cache dtype)")
    p.add_argument("--dim", action="append", default=[], metavar="NAME=N|NAME=MIN:MAX[:B1,B2,...][:%%D]",
                   help="MODEL.pt2: fix a dynamic dim or give its bounds and buckets; a saved program's dims are "
                        "named <input>_<axis> (repeatable)")
    a = p.parse_args(argv)
    model_args = {}
    for kv in a.model_arg:
        k, sep, v = kv.partition("=")
        if not sep or not k:
            print(f"dinoml compile: error: --model-arg expects KEY=VALUE, got {kv!r}", file=sys.stderr)
            return 1
        model_args[k] = int(v) if v.lstrip("-").isdigit() else v
    if a.gguf:
        model_args["gguf"] = a.gguf
    from .compiler import compile as dml_compile
    try:
        gguf_model = a.model.endswith(".gguf")
        if a.gguf and gguf_model:
            raise ValueError("--gguf names the GGUF file of a MODEL.py; compile a .gguf file directly without it")
        if model_args and not (a.model.endswith(".py") or gguf_model):
            raise ValueError("--gguf / --model-arg apply to MODEL.py and MODEL.gguf files only")
        if a.dim and not a.model.endswith(".pt2"):
            raise ValueError("--dim applies to MODEL.pt2 files only")
        if a.model.endswith(".py"):
            spec = load_model_file(a.model, **model_args)
        elif gguf_model:
            spec = load_gguf_model(a.model, **model_args)
        elif a.model.endswith(".pt2"):
            spec = load_exported_program(a.model, a.dim)
        else:
            spec = Spec.load(a.model)
        art = dml_compile(spec, target=a.target, out=a.out, dump_passes=a.dump_passes, fuse=not a.no_fuse,
                          use_cache=not a.no_cache, verbose=a.verbose, profile=a.profile,
                          execution_plan=a.execution_plan, strict=a.strict, arch=a.arch, tf32=not a.no_tf32,
                          fp32_matmul_precision=a.fp32_matmul_precision, weights=a.weights,
                          tensor_parallel=a.tensor_parallel)
        if gguf_model:
            link_tokenizer(art.path, a.model)
    except (CompileError, ShapeError, IrError, ValueError, FileNotFoundError, TraceError) as e:
        print(f"dinoml compile: error: {e}", file=sys.stderr)
        return 1
    hit = " (module from cache)" if art.cache_hit else ""
    secs = f", {art.seconds:.2f} s" if art.seconds is not None else ""
    print(f"compiled '{spec.name}' for {a.target} -> {art.path}{hit}{secs}")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "compile":
        return _compile(argv[1:])
    if argv and argv[0] == "serve":
        try:
            from .serve.cli import main as serve_main
        except ImportError as e:
            print(f"dinoml serve: error: {e.name or e} is not installed in {sys.executable}: the server needs the "
                  "`serve` extra (pip install 'dinoml[serve]': uvicorn, starlette, prometheus_client); the C++ "
                  "`dinoml` runs $DINOML_PYTHON (default /usr/bin/python3)", file=sys.stderr)
            return 1
        return serve_main(argv[1:])
    if argv and argv[0] == "generate":
        from .tools import generate
        return generate.main(argv[1:])
    if argv and argv[0] == "chat":
        from .tools import chat
        return chat.main(argv[1:])
    if argv and argv[0] in ("benchmark-ops", "benchmark-torch-ops"):
        from .tools import benchmark_ops
        return benchmark_ops.main(argv[1:], torch_only=argv[0] == "benchmark-torch-ops")
    # The C++ CLI writes to the process's stdout/stderr directly: flush Python's buffers first
    # so the output stays in order.
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        return int(ext.cli_main(argv))
    except RuntimeError as e:
        print(f"dinoml: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

"""DinoML artifacts as a Ray Serve application: replicas each hold a loaded module, requests are
batched across callers with @serve.batch along the artifact's dynamic batch axis.

    pip install "ray[serve]"
    python examples/serving/ray_serve.py out/linear          # local Ray, 2 replicas, HTTP on :8000
    curl -s localhost:8000/ -d '{"x": [[1,2,3,4,5,6,7,8]]}'    # -> {"y": [[...]]}

The artifact needs one input whose first axis is a dynamic dim (the batch); every output must
have the same first axis. A batch of requests is concatenated on that axis (in runs of at most
the dim's maximum), run once, and split back per request. Replicas scale between
`min_replicas` and `max_replicas` with the number of requests in flight.
"""
from __future__ import annotations

import os
import sys
from typing import Dict, List

import numpy as np

try:
    import dinoml as dml
except ImportError:  # running from a source checkout: the package lives in python/
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                    "python"))
    import dinoml as dml

from ray import serve
from starlette.requests import Request


class DinoMLModel:
    """One replica: the module, one session, and the batching of its first input's dynamic axis."""

    def __init__(self, artifact: str):
        self.module = dml.runtime.load(artifact)
        self.session = self.module.create_session()
        if len(self.module.inputs) != 1:
            raise ValueError(f"{artifact}: the Ray Serve example batches models with one input, this one has "
                             f"{[i.name for i in self.module.inputs]}")
        self.input = self.module.inputs[0]
        name, lo, hi = self.input.axes[0]
        if name is None:
            raise ValueError(f"{artifact}: input '{self.input.name}' has a fixed first axis; batching needs a "
                             "dynamic batch dim")
        self.max_batch = int(hi)
        self.dtype = np.dtype(self.input.dtype)

    def run(self, xs: List[np.ndarray]) -> List[Dict[str, np.ndarray]]:
        """Concatenates requests on axis 0 (runs of at most max_batch rows), runs, splits back."""
        results: List[Dict[str, np.ndarray]] = []
        group: List[np.ndarray] = []

        def flush():
            if not group:
                return
            out = self.session.run_numpy({self.input.name: np.concatenate(group, axis=0)})
            start = 0
            for x in group:
                results.append({k: v[start:start + len(x)] for k, v in out.items()})
                start += len(x)
            group.clear()

        for x in xs:
            if sum(len(g) for g in group) + len(x) > self.max_batch:
                flush()
            group.append(x)
        flush()
        return results


# max_ongoing_requests >= max_batch_size, or a replica never holds enough requests to fill a batch.
@serve.deployment(ray_actor_options={"num_cpus": 0.5}, max_ongoing_requests=32,
                  autoscaling_config={"min_replicas": 2, "max_replicas": 4, "target_ongoing_requests": 8})
class DinoMLDeployment:
    def __init__(self, artifact: str):
        self.model = DinoMLModel(artifact)
        self.batches: List[int] = []  # sizes of the batches run, for tests and logs

    @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.01)
    async def infer(self, xs: List[np.ndarray]) -> List[Dict[str, list]]:
        self.batches.append(len(xs))
        return [{k: v.tolist() for k, v in r.items()} for r in self.model.run(xs)]

    async def __call__(self, request: Request) -> Dict:
        body = await request.json()
        name = self.model.input.name
        if not isinstance(body, dict) or name not in body:
            return {"error": f"send {{\"{name}\": [[...], ...]}} (rows of the model's input)"}
        x = np.asarray(body[name], dtype=self.model.dtype)
        tail = list(self.model.input.shape[1:])
        if x.ndim != len(tail) + 1 or list(x.shape[1:]) != tail or not 1 <= len(x) <= self.model.max_batch:
            return {"error": f"'{name}' must be 1..{self.model.max_batch} rows of shape {tail}, got {list(x.shape)}"}
        return await self.infer(x)

    def batch_sizes(self) -> List[int]:
        return list(self.batches)

    def pid(self) -> int:
        return os.getpid()


def app(artifact: str):
    return DinoMLDeployment.bind(os.path.abspath(artifact))


if __name__ == "__main__":
    import time

    import ray
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    ray.init(num_cpus=2, include_dashboard=False)
    serve.run(app(sys.argv[1]), route_prefix="/")
    print("serving on http://127.0.0.1:8000/ (Ctrl-C stops)")
    try:
        while True:
            time.sleep(1)
    except KeyboardInterrupt:
        serve.shutdown()

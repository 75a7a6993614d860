"""Helpers several Python tests share: the seed example model and running a function on threads."""
import threading

import dinoml as dml


class Linear(dml.Module):
    """y = x @ weight + bias: x [*, 8], weight [8, 6], bias [6] (the seed example); output "y"."""

    def __init__(self):
        self.weight = dml.Parameter([8, 6])
        self.bias = dml.Parameter([6])

    def forward(self, x):
        return dml.ops.output(dml.ops.gemm_rrr_bias(x, self.weight, self.bias), "y")


class Gemm8(dml.Module):
    """Eight 512x512 GEMM + ReLU layers on x [rows, 512] (weights w0..w7); output "y": a model whose
    runs take milliseconds (server queue, shutdown and load tests)."""

    def __init__(self):
        for i in range(8):
            setattr(self, f"w{i}", dml.Parameter([512, 512]))

    def forward(self, x):
        for i in range(8):
            x = dml.ops.relu(dml.ops.gemm_rrr(x, getattr(self, f"w{i}")))
        return dml.ops.output(x, "y")


def run_threads(work, n):
    """Runs work(0) ... work(n - 1), each on its own thread, and waits for all of them."""
    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

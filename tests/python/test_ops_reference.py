"""The C++ reference interpreter (`dml.reference`) against NumPy.

The reference interpreter is the oracle the compiler itself trusts (constant folding,
`dinoml validate`), so it gets the same parity catalogue as the compiled CPU path: every case of
test_ops_{gemm,elementwise,reduce_norm,shape}.py, every dim assignment, same tolerances.  No
compile happens here, so this file is fast and independent of the lowering and kernels.
"""
import numpy as np
import pytest

import op_harness as H
import test_ops_elementwise as elementwise_cases
import test_ops_gemm as gemm_cases
import test_ops_reduce_norm as reduce_norm_cases
import test_ops_shape as shape_cases

BATCHES = gemm_cases.BATCHES + elementwise_cases.BATCHES + reduce_norm_cases.BATCHES + shape_cases.BATCHES

# Front-end failures (trace errors) are shared with the compiled tests; entries specific to the
# reference interpreter go into REFERENCE_XFAIL.  case id (or 'id@dims') -> reason.
REFERENCE_XFAIL = {}
XFAIL = {**gemm_cases.XFAIL, **elementwise_cases.XFAIL, **reduce_norm_cases.XFAIL, **shape_cases.XFAIL,
         **REFERENCE_XFAIL}


@pytest.mark.parametrize("batch,case,run", H.params(BATCHES, XFAIL))
def test_reference_parity(batch, case, run):
    H.check(batch, case, run, "reference")


def test_reference_matches_compiled_on_a_fused_chain(tmp_path):
    """The interpreter and the compiled module agree on a graph that the passes rewrite
    (elementwise fusion + gemm epilogue fusion), not just on single ops."""
    dml = H.dml()

    def fn(ops, t):
        h = ops.gemm_rcr_bias(t["x"], t["w"], t["b"])
        y = ops.mul(ops.gelu(h), ops.sigmoid(ops.add(h, 1.0)))
        ops.output(ops.softmax(y, axis=-1), "y")

    spec = H.api_trace(fn, {"x": ((3, 16), "float32"), "w": ((8, 16), "float32"), "b": ((8,), "float32")})
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((3, 16)).astype(np.float32),
             "w": (rng.standard_normal((8, 16)) * 0.25).astype(np.float32),
             "b": rng.standard_normal(8).astype(np.float32)}
    ref = dml.reference(spec, dict(feeds))["y"]
    dml.compile(spec, target="cpu", out=str(tmp_path / "art"))
    got = dml.runtime.load(str(tmp_path / "art")).create_session().run_numpy(dict(feeds))["y"]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
    x = feeds["x"].astype(np.float64)
    h = x @ feeds["w"].astype(np.float64).T + feeds["b"]
    want = H.np_softmax(H.np_gelu(h) * H.np_sigmoid(h + 1.0), -1)
    np.testing.assert_allclose(ref, want, rtol=1e-5, atol=1e-6)

"""dinoml.Sampler (src/generate/sampler.cpp) against a NumPy reference of the same chain:
repetition penalty -> top-k -> top-p -> min-p (both at temperature 1) -> temperature; greedy at
temperature 0; seeded draws reproduce, and their frequencies follow the distribution."""
import numpy as np
import pytest

import dinoml as dml


def reference(logits, temperature=0.8, top_k=40, top_p=0.95, min_p=0.05, repeat_penalty=1.0, history=(),
              frequency_penalty=0.0, presence_penalty=0.0):
    l = np.asarray(logits, dtype=np.float32).copy()
    for t in set(history):
        l[t] = l[t] / np.float32(repeat_penalty) if l[t] > 0 else l[t] * np.float32(repeat_penalty)
        l[t] -= np.float32(history.count(t) * frequency_penalty + presence_penalty)
    l = l.astype(np.float64)
    if temperature <= 0:
        return np.array([int(np.argmax(l))]), np.array([1.0])
    ids = np.array(sorted(range(len(l)), key=lambda i: (-l[i], i)))
    if 0 < top_k < len(ids):
        ids = ids[:top_k]

    def softmax(x):
        e = np.exp(x - x.max())
        return e / e.sum()
    if top_p < 1:
        c = np.cumsum(softmax(l[ids]))
        ids = ids[:max(1, int(np.searchsorted(c, top_p) + 1))]
    if min_p > 0 and len(ids) > 1:
        p = softmax(l[ids])
        ids = ids[p >= p[0] * min_p]
    return ids, softmax(l[ids] / temperature)


CASES = [dict(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0), dict(temperature=0.7, top_k=10, top_p=1.0, min_p=0.0),
         dict(temperature=1.0, top_k=0, top_p=0.9, min_p=0.0), dict(temperature=1.3, top_k=0, top_p=1.0, min_p=0.1),
         dict(temperature=0.8, top_k=40, top_p=0.95, min_p=0.05), dict(temperature=0.5, top_k=5, top_p=0.5, min_p=0.2),
         dict(temperature=0.0, top_k=40, top_p=0.95, min_p=0.05)]


@pytest.mark.parametrize("kw", CASES)
def test_distribution_matches_numpy(kw):
    rng = np.random.default_rng(0)
    for trial in range(20):
        logits = (rng.standard_normal(200) * 3).astype(np.float32)
        ids, p = dml.Sampler(**kw).distribution(logits)
        rid, rp = reference(logits, **kw)
        assert list(ids) == list(rid), (trial, kw)
        np.testing.assert_allclose(p, rp, rtol=1e-5, atol=1e-7)


def test_repetition_penalty():
    logits = np.array([2.0, -1.0, 1.5, 0.5, -3.0], dtype=np.float32)
    s = dml.Sampler(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.5, repeat_last_n=2)
    s.accept([0, 1, 1])  # only the last 2 (1, 1) stay in the history
    ids, p = s.distribution(logits)
    rid, rp = reference(logits, 1.0, 0, 1.0, 0.0, 1.5, history=[1])
    assert list(ids) == list(rid)
    np.testing.assert_allclose(p, rp, rtol=1e-6)
    g = dml.Sampler(temperature=0, repeat_penalty=2.0)
    g.accept(0)
    assert g.sample(logits) == 2  # 2.0 / 2 = 1.0 < 1.5
    f = dml.Sampler(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, frequency_penalty=0.5, presence_penalty=0.25)
    f.accept([2, 2, 3])
    ids, p = f.distribution(logits)
    rid, rp = reference(logits, 1.0, 0, 1.0, 0.0, history=[2, 2, 3], frequency_penalty=0.5, presence_penalty=0.25)
    assert list(ids) == list(rid)
    np.testing.assert_allclose(p, rp, rtol=1e-6)


def test_tiny_temperatures_stay_finite():
    logits = np.array([1.0, 3.0, 3.0, -2.0], dtype=np.float32)
    for t in (1e-30, 1e-38, 1e-45):
        ids, p = dml.Sampler(temperature=t, top_k=0, top_p=1.0, min_p=0.0).distribution(logits)
        assert np.all(np.isfinite(p)) and list(ids[:2]) == [1, 2] and abs(p[0] - 0.5) < 1e-6


def test_top_k_1_is_greedy_and_seed_reproduces():
    rng = np.random.default_rng(1)
    for _ in range(50):
        logits = rng.standard_normal(1000).astype(np.float32)
        assert dml.Sampler(temperature=1.0, top_k=1, seed=7).sample(logits) == int(np.argmax(logits))
        assert dml.Sampler(temperature=0).sample(logits) == int(np.argmax(logits))
    logits = rng.standard_normal(50).astype(np.float32)
    a = dml.Sampler(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=123)
    b = dml.Sampler(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=123)
    c = dml.Sampler(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=124)
    sa = [a.sample(logits) for _ in range(200)]
    assert sa == [b.sample(logits) for _ in range(200)]
    assert sa != [c.sample(logits) for _ in range(200)]
    a.reset(123)
    assert [a.sample(logits) for _ in range(200)] == sa


def test_draw_frequencies_follow_the_distribution():
    logits = np.array([1.0, 0.5, 0.0, -0.5, -1.0, -4.0], dtype=np.float32)
    s = dml.Sampler(temperature=0.9, top_k=0, top_p=0.95, min_p=0.0, seed=5)
    ids, p = s.distribution(logits)
    n = 40000
    counts = np.bincount([s.sample(logits) for _ in range(n)], minlength=len(logits))
    assert set(np.nonzero(counts)[0]) == set(ids)  # filtered tokens never drawn
    expected = np.zeros(len(logits))
    expected[ids] = p * n
    assert np.all(np.abs(counts - expected) < 5 * np.sqrt(expected + 1))


@pytest.mark.parametrize("kw, msg", [(dict(top_p=0.0), "top_p"), (dict(min_p=1.5), "min_p"),
                                     (dict(repeat_penalty=0.0), "repeat_penalty"),
                                     (dict(temperature=float("nan")), "temperature"), (dict(repeat_last_n=-1), "repeat_last_n")])
def test_bad_parameters(kw, msg):
    with pytest.raises(ValueError, match=msg):
        dml.Sampler(**kw)
    with pytest.raises(ValueError, match="NaN"):
        dml.Sampler(temperature=1.0).sample(np.array([0.0, np.nan], dtype=np.float32))

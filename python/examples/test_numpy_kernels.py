"""The numpy kernels of impls/worker_example/numpy_worker.py, judged by conform from this pytest process.

    pytest python/examples/test_numpy_kernels.py        (with the package installed: docs/pytest.md)
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "impls" / "worker_example"))
import numpy_worker  # noqa: E402


def test_every_op(conform):
    report = conform.check(numpy_worker.make_worker())  # every op it registers, 100 cases each
    assert report.passed


def test_rmsnorm_as_a_plain_function(conform):
    conform.check(lambda x, weight, norm_eps, norm_plus_one: numpy_worker.rmsnorm(
        x, weight, config={"norm_eps": norm_eps, "norm_plus_one": norm_plus_one}), op="rmsnorm", name="np_rmsnorm")


def test_a_kernel_that_quantises_its_activations(conform):
    # llama.cpp's CPU kernels quantise each weight product's input to Q8_0
    # blocks first. Declared, conform's baselines quantise the same way;
    # undeclared, the same kernel would fail as a float32 claim.
    import numpy as np
    import conform_worker

    def swiglu_q8_0(x, w1, w3, w2, hidden_act):
        q = lambda a: conform_worker.act_quant_round_trip(a, "q8_0")  # noqa: E731
        xq = q(x)
        gate = xq @ w1
        # GeGLU (Gemma): gelu_tanh(a) = a * sigmoid(2 sqrt(2/pi) (a + 0.044715 a^3))
        z = gate if hidden_act == "silu" else np.float32(1.5957691216057308) * (gate + np.float32(0.044715) * gate ** 3)
        with np.errstate(over="ignore"):
            act = gate / (np.float32(1) + np.exp(-z))
        return q(act * (xq @ w3)) @ w2

    assert conform.check(swiglu_q8_0, op="swiglu", activation_quant={"swiglu": "q8_0"}).passed

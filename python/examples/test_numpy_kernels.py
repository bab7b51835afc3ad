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

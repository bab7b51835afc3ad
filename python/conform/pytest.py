"""The pytest plugin: a `conform` fixture whose check() judges a kernel with conform.

    def test_rope(conform):
        conform.check(my_rope, op="rope")

Loaded by the package's entry point when it is installed, or by
`pytest_plugins = ["conform.pytest"]` / `pytest -p conform.pytest`.

Options: --conform-seed N|random, --conform-cases N, --conform-dtype f32|bf16|f16,
--conform-bin PATH. A marker sets a test's own defaults:
`@pytest.mark.conform(cases=20, dtype="bf16")`; keyword arguments to check()
win over both. A failure's message is conform's report; its case id is also
recorded as the test's `conform_case` property (JUnit XML: <property>).
"""

import random

import pytest

from ._check import check as _check

_seed_drawn = None


def pytest_addoption(parser):
    g = parser.getgroup("conform", "conform: kernels judged against a float64 reference")
    g.addoption("--conform-seed", default=None,
                help="seed of conform's property cases: an integer, or 'random' (drawn once per session, printed)")
    g.addoption("--conform-cases", type=int, default=None, help="property cases per op (conform's default: 100)")
    g.addoption("--conform-dtype", default=None, choices=("f32", "bf16", "f16"),
                help="the dtype kernels are asked to compute in (default f32)")
    g.addoption("--conform-bin", default=None, help="the conform executable (default: $CONFORM_BIN, PATH, build tree)")


def pytest_configure(config):
    config.addinivalue_line("markers", "conform(**defaults): conform.check() defaults for this test "
                                       "(cases, dtype, seed, config, timeout, ...)")
    global _seed_drawn
    if config.getoption("conform_seed", None) == "random":
        _seed_drawn = random.SystemRandom().randrange(1, 2**31)


def _seed_line(config):
    if config.getoption("conform_seed", None) == "random":
        return "conform: --conform-seed random drew %d (rerun with --conform-seed %d)" % (_seed_drawn, _seed_drawn)
    return None


def pytest_report_header(config):
    return _seed_line(config)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    # Again at the end, where -q (which hides the header) still shows it.
    line = _seed_line(config)
    if line:
        terminalreporter.write_line(line)


class Conform:
    """What the fixture gives a test: check() with the session's options and
    the test's marker as defaults."""

    def __init__(self, request):
        self._request = request
        opt = request.config.getoption
        self.defaults = {}
        seed = opt("conform_seed")
        if seed == "random":
            self.defaults["seed"] = _seed_drawn
        elif seed is not None:
            try:
                self.defaults["seed"] = int(seed)
            except ValueError:
                raise pytest.UsageError("--conform-seed: expected an integer or 'random', found %r" % seed)
        if opt("conform_cases") is not None:
            self.defaults["cases"] = opt("conform_cases")
        if opt("conform_dtype") is not None:
            self.defaults["dtype"] = opt("conform_dtype")
        if opt("conform_bin") is not None:
            self.defaults["binary"] = opt("conform_bin")
        for mark in reversed(list(request.node.iter_markers("conform"))):
            self.defaults.update(mark.kwargs)
        self.reports = []

    def check(self, fn, op=None, **kwargs):
        """conform.check(fn, op, ...) with this session's defaults; the report,
        or conform.Nonconformance (its case id recorded as the test's
        `conform_case` property)."""
        args = dict(self.defaults)
        args.update(kwargs)
        try:
            report = _check(fn, op, **args)
        except Exception as e:
            case = getattr(e, "case_id", None)
            if case:
                self._request.node.user_properties.append(("conform_case", case))
                self._request.node.user_properties.append(("conform_seed", getattr(e, "seed", None)))
            raise
        self.reports.append(report)
        return report


@pytest.fixture
def conform(request):
    """conform.check() with the session's --conform-* options and the test's
    @pytest.mark.conform(...) as defaults."""
    return Conform(request)

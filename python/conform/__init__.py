"""conform from Python: test a kernel that lives in the calling process.

    import conform

    def my_rope(x, positions, *, head_dim, rope_theta, rope_layout, **_):
        ...
        return out

    conform.check(my_rope, op="rope")        # raises conform.Nonconformance

`check` starts conform (the judge: the float64 reference, the tolerance,
shrinking, diagnosis) as its own process and serves its calls from this one,
over two pipes (`conform --impl-fd`): the kernel keeps its GPU context, its
compiled kernels and its imports. docs/pytest.md is the tutorial;
`conform.pytest` is the pytest plugin (a `conform` fixture).
"""

from ._check import (ConformError, ConformNotFound, Nonconformance, Report, bench, check, find_binary, twists,
                     CONFIG_FIELDS, OPS)

__all__ = ["check", "bench", "find_binary", "twists", "Nonconformance", "ConformError", "ConformNotFound", "Report",
           "OPS", "CONFIG_FIELDS"]

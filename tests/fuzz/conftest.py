"""One Hypothesis profile for the fuzz tests: no example database on disk (CI
starts from a clean tree anyway), no per-example deadline (the machine is
shared), and a number of examples that keeps the whole directory well under a
minute."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

settings.register_profile("voxgate", database=None, deadline=None, max_examples=200,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile("voxgate")

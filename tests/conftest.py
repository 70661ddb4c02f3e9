"""Suite-wide test configuration: hypothesis profiles.

``ci`` (the default under CI=true) keeps property tests deterministic and bounded so the whole
suite stays well under CI's time; ``dev`` is the default elsewhere; ``thorough`` is for a long
local run (``HYPOTHESIS_PROFILE=thorough``).
"""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=60,
    deadline=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "dev", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("thorough", max_examples=1000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

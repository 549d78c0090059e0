import os

from hypothesis import HealthCheck, settings

# CI machines are small and shared; deadlines would make property tests flaky, not stricter.
settings.register_profile("ringlab", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ringlab"))

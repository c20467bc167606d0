"""``python -m tests.golden``: measure the golden runs' drift under kernel changes and other seeds (drift.json)."""
from tests.golden import record_drift

record_drift()

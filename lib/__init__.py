"""The companion's library: data, models, losses, diagnostics, training, statistics, results."""
from pathlib import Path

# The repository root: relative results folders and notebook paths are resolved against it.
PROJECT_ROOT = Path(__file__).resolve().parents[1]

"""docs/layout.md's recipe for a new study, followed for a toy seventh study in a copy of the project (nothing of
it is shipped): its module on study 6's run family, its registry line, its notebook with the parameters cell that
``python -m lib.notebook --parameters 07 --write`` creates, then ``python -m lib.run_all --only 07 --profile
smoke``: it plans, trains and renders, and its verdict table comes from the verdict engine, its row made from a
declared statement (``STATEMENTS``, id ``s7.separation``) and marked as the study's ``CENTRAL`` claim."""
import importlib.util
import json
import shutil
import subprocess
import sys
import textwrap

import nbformat
import pandas as pd
import pytest

from lib import PROJECT_ROOT
from lib.studies.study import is_central

TOY_MODULE = '''
"""A toy seventh study (tests/test_new_study_recipe.py): in the minimal collapse model, do more frustrated
samples shrink the label geometry further? Built by docs/layout.md's recipe on study 6's run family."""
from __future__ import annotations

from typing import Optional

import pandas as pd

from lib.collapse.training import CollapseConfig, train_collapse
from lib.core import settings, verdicts
from lib.core.settings import setting

STUDY = "07_toy_collapse"
PAPER_DATA = "none: a toy"
QUESTION = "Do more frustrated samples shrink the label geometry further?"
CENTRAL = "s7.separation"  # the id of the central claim's row
SCALE = ("num_classes", "embed_dim", "steps", "seeds")
TRAIN = train_collapse
PROFILES = {name: dict(num_classes=4, embed_dim=8, samples_per_class=10, steps=200, seeds=3)
            for name in ("smoke", "quick", "cpu", "paper")}


class Settings(settings.RunOptions):
    """The toy's parameters: CollapseConfig fields (checked by the config) and its seed count."""

    profiles = PROFILES
    config = CollapseConfig
    num_classes: Optional[int] = setting(None, "n: classes (config: {default})")
    embed_dim: Optional[int] = setting(None, "d: embedding dimension")
    samples_per_class: Optional[int] = setting(None, "m: samples per class")
    steps: Optional[int] = setting(None, "integration steps")
    seeds: Optional[int] = setting(None, "seeds per r", settings.seed_count(2))


def resolve(p: dict) -> dict:
    s = Settings.resolve(p)
    plan(s)
    return s


def plan(s: dict) -> list:
    return [Settings.run_config(s, experiment="embedding", r=r, seed=seed) for r in (0.0, 0.2)
            for seed in range(s["seeds"])]


def sweep_options(s: dict) -> dict:
    return {"force": s["force"]}


def runs_frame(records: list[dict]) -> pd.DataFrame:
    return pd.DataFrame([dict(run_id=r["run_id"], status=r["status"], r=r["config"]["r"], seed=r["config"]["seed"],
                              separation=r["metrics"].get("min_label_distance_final_ratio")) for r in records])


def analyze(runs: pd.DataFrame, s: dict) -> pd.DataFrame:
    return runs.groupby("r").separation.agg(["mean", "std", "count"]).reset_index()


STATEMENTS = (
    verdicts.Statement("s7.separation", paper="more frustrated samples shrink the label geometry further",
                       evidence="[ours]", ours="final min label distance over its start, r = 0 over r = 0.2, "
                       "per seed", conditions="none stated", measure="ratio", published=2.0, family="toy"),
)


def paper_vs_reproduced(runs: pd.DataFrame) -> pd.DataFrame:
    def arm(r):
        return {int(x.seed): float(x.separation) for x in runs[runs.r == r].itertuples()}
    claim = verdicts.statement_of(STATEMENTS, "s7.separation").claim(
        "final separation, r = 0 over r = 0.2", cells=(verdicts.cell(r=0.0), verdicts.cell(r=0.2)))
    return verdicts.table(verdicts.decide([verdicts.evaluate(claim, arm(0.0), arm(0.2))]))
'''

TOY_NOTEBOOK = '''# %% [markdown]
# # Study 7 — a toy, by the recipe

# %%
from IPython.display import display

from lib.notebook import setup
from lib.studies import toy_collapse as study

nb = setup(study, globals())
records, runs = nb.run(study.runs_frame, show=["r", "seed"])
display(study.analyze(runs, nb.settings))

# %% tags=["findings"]
table = study.paper_vs_reproduced(runs)
nb.store.write_frame("paper_vs_reproduced", table)  # the reader's CSV and the typed records (_verdicts.json)
display(table)
'''


@pytest.fixture
def house(tmp_path):
    """A copy of the project's code and docs, its results empty, with the toy study added by the recipe's steps."""
    root = tmp_path / "project"
    for part in ("lib", "docs", "notebooks"):
        shutil.copytree(PROJECT_ROOT / part, root / part, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "results").mkdir()
    (root / "lib" / "studies" / "toy_collapse.py").write_text(textwrap.dedent(TOY_MODULE).lstrip())
    registry = root / "lib" / "studies" / "__init__.py"
    text = registry.read_text()
    text = text.replace("from lib.studies import ", "from lib.studies import toy_collapse, ", 1)
    text = text.replace('    Study("06", "06_stop_gradient_collapse", stop_gradient),\n',
                        '    Study("06", "06_stop_gradient_collapse", stop_gradient),\n'
                        '    Study("07", "07_toy_collapse", toy_collapse),\n')
    registry.write_text(text)
    sibling = (root / "notebooks" / "06_stop_gradient_collapse.py").read_text()
    header = sibling[:sibling.index("# ---\n", 1) + len("# ---\n")]  # the pair's jupytext and kernel metadata
    (root / "notebooks" / "07_toy_collapse.py").write_text(header + "\n" + TOY_NOTEBOOK)
    return root


def run(root, *args):
    return subprocess.run([sys.executable, *args], cwd=root, capture_output=True, text=True, timeout=600)


def test_a_seventh_study_by_the_recipe_plans_runs_and_renders(house):
    assert "from lib.studies import toy_collapse," in (house / "lib" / "studies" / "__init__.py").read_text()
    made = run(house, "-m", "jupytext", "--to", "ipynb", "notebooks/07_toy_collapse.py")
    assert made.returncode == 0, made.stderr
    made = run(house, "-m", "lib.notebook", "--parameters", "07", "--write")  # the recipe's step 4
    assert made.returncode == 0, made.stderr
    nb = nbformat.read(house / "notebooks" / "07_toy_collapse.ipynb", as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    assert cell.source.startswith("# From lib/studies/toy_collapse.py (Settings): edit there")
    assert "num_classes: Optional[int] = None  # n: classes (config: 10)" in cell.source  # {default} read
    rendered = run(house, "-m", "lib.run_all", "--only", "07", "--profile", "smoke")
    assert rendered.returncode == 0, rendered.stdout + rendered.stderr
    assert "07_toy_collapse.ipynb: 0 of 6 runs recorded, 6 to train" in rendered.stdout
    assert (house / "results" / "notebooks" / "07_toy_collapse_smoke_report.html").exists()
    assert len(list((house / "results" / "runs" / "07_toy_collapse" / "smoke").glob("*.json"))) == 6
    tables = house / "results" / "tables"
    table = pd.read_csv(tables / "07_toy_collapse_smoke_paper_vs_reproduced.csv")
    assert list(table.quantity) == ["final separation, r = 0 over r = 0.2"] and table.n[0] == "3 vs 3"
    assert list(table["id"]) == ["s7.separation"]  # the row is keyed by its statement's id
    records = json.loads((tables / "07_toy_collapse_smoke_verdicts.json").read_text(encoding="utf-8"))
    assert [r["id"] for r in records] == ["s7.separation"]
    assert records[0]["measure"] == "ratio" and records[0]["published"] == 2.0 and records[0]["family"] == "toy"
    assert records[0]["cells"] == [{"r": 0.0}, {"r": 0.2}]
    spec = importlib.util.spec_from_file_location("toy_collapse", house / "lib" / "studies" / "toy_collapse.py")
    toy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(toy)
    assert is_central(records[0]["id"], toy) and not is_central("s7.other", toy)
    html = (house / "results" / "notebooks" / "07_toy_collapse_smoke_report.html").read_text(encoding="utf-8")
    assert "<b>central claim</b>: final separation, r = 0 over r = 0.2" in html  # the notebook marks its row
    claims = run(house, "-m", "lib.studies.claims")  # docs/claims.md from every registered study's STATEMENTS
    assert claims.returncode == 0, claims.stderr
    text = (house / "docs" / "claims.md").read_text(encoding="utf-8")
    assert "## 07_toy_collapse" in text and "| `s7.separation` | more frustrated samples" in text

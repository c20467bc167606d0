"""The project stands on its own: what a user reads points at nothing outside the repository, its links
resolve, the ``download`` parameter fails offline with a message that says what to do, and ``download``
is no part of what a run computes (its config hash, its variant)."""
from __future__ import annotations

import re
import urllib.error
from pathlib import Path

import pytest

from lib import PROJECT_ROOT, dispatch, run_all
from lib.core import data as data_module
from lib.core.data import DatasetNotFoundError, get_dataset
from lib.core.params import ParameterError
from lib.studies import STUDIES
from lib.studies.variants import notebook_defaults, resolve_command, variant_of

ROOT = PROJECT_ROOT.resolve()
# What a user reads: the README, the notebooks (their jupytext text), the docs and the report's page.
DOCUMENTS = sorted([ROOT / "README.md", *ROOT.glob("notebooks/*.py"), *ROOT.glob("docs/*.md"),
                    ROOT / "lib" / "report.py"])
NAMED_OUTSIDE = re.compile(r"STUDIES\.md|/work/|(?i:shared folder)")  # docs/studies.md is in lower case
PARENT_PATH = re.compile(r"(?:\.\./)+[\w.\-/]*")
MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")


def outside_references(text: str, folder: Path) -> list[str]:
    """The references in ``text`` (of a file in ``folder``) to anything outside the repository: the
    specification's old home, absolute machine paths, and ``../`` paths to nothing in the project."""
    found = [m.group(0) for m in NAMED_OUTSIDE.finditer(text)]
    for m in PARENT_PATH.finditer(text):
        target = (folder / m.group(0).rstrip(".")).resolve()
        if not (target.is_relative_to(ROOT) and target.exists()):
            found.append(m.group(0))
    return found


def slug(heading: str) -> str:
    """A Markdown heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.DOTALL)
    return {slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", text, re.MULTILINE)}


def broken_links(path: Path) -> list[str]:
    """The relative links of a Markdown file whose file is not in the repository, or whose anchor is not a
    heading of it."""
    broken = []
    for target in MARKDOWN_LINK.findall(path.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        if not (linked.is_relative_to(ROOT) and linked.is_file()):
            broken.append(target)
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(target)
    return broken


# ----------------------------------------------------------------------------- references and links


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_document_refers_outside_the_repository(path):
    assert outside_references(path.read_text(encoding="utf-8"), path.parent) == []


def test_the_reference_check_finds_each_kind_and_allows_paths_inside():
    text = ("see STUDIES.md in the team's Shared Folder; --data-root ../shared/data; /work/main/x; "
            "the spec is ../docs/studies.md")
    found = outside_references(text, ROOT / "notebooks")
    assert found == ["STUDIES.md", "Shared Folder", "/work/", "../shared/data"]  # ../docs/studies.md is here
    assert outside_references("../../shared/data, ../README.md.", ROOT / "notebooks") == ["../../shared/data"]


@pytest.mark.parametrize("path", [ROOT / "README.md", *ROOT.glob("docs/*.md")], ids=lambda p: p.name)
def test_every_relative_link_resolves_in_the_repository(path):
    assert broken_links(path) == []


def test_the_link_check_finds_a_missing_file_and_a_missing_heading(tmp_path):
    page = ROOT / "docs" / "studies.md"
    assert "profiles" in anchors(page) and "study-1--margin-factorial-on-cifar-10" in anchors(page)
    fake = ROOT / "docs" / "_link_check.md"
    fake.write_text("[a](studies.md#profiles) [b](studies.md#no-such-heading) [c](nothing.md) "
                    "[d](../../outside.md) [e](https://example.org/x.md)", encoding="utf-8")
    try:
        assert broken_links(fake) == ["studies.md#no-such-heading", "nothing.md", "../../outside.md"]
    finally:
        fake.unlink()


def test_the_specification_is_linked_from_readme_and_every_notebook():
    assert "](docs/studies.md)" in (ROOT / "README.md").read_text(encoding="utf-8")
    for notebook in ROOT.glob("notebooks/[0-9][0-9]_*.py"):
        assert "`docs/studies.md`" in notebook.read_text(encoding="utf-8"), notebook.name


# ----------------------------------------------------------------------------- download


class OfflineCIFAR10:
    """torchvision's CIFAR10 on a machine without internet: the files are absent, and a download fails."""

    def __init__(self, root, train=True, download=False, **kwargs):
        if download:
            raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")
        raise RuntimeError("Dataset not found or corrupted. You can use download=True to download it")


@pytest.fixture
def offline(monkeypatch, tmp_path):
    import torchvision.datasets

    monkeypatch.setattr(torchvision.datasets, "CIFAR10", OfflineCIFAR10)
    monkeypatch.delenv("DATA_ROOT", raising=False)
    monkeypatch.setenv("TORCHVISION_CACHE", str(tmp_path / "tv"))
    data_module._cached_dataset.cache_clear()
    yield tmp_path
    data_module._cached_dataset.cache_clear()


def test_download_offline_names_the_parameter_the_dataset_and_what_to_do(offline):
    with pytest.raises(DatasetNotFoundError) as err:
        get_dataset("cifar10", download=True)
    first, *rest = str(err.value).splitlines()
    # the first line alone tells the story: lib.run_all reports only that line of a failed notebook
    assert "'cifar10'" in first and "download=True" in first and "URLError" in first
    todo = "\n".join(rest)
    assert "data_root" in todo and "TORCHVISION_CACHE" in todo and "'digits'" in todo
    assert str(offline / "tv") in todo  # the cache to bring from a machine with internet


def test_missing_data_without_download_names_the_parameter_and_its_options(offline):
    with pytest.raises(DatasetNotFoundError) as err:
        get_dataset("cifar10")
    message = str(err.value)
    assert "download=False" in message.splitlines()[0]
    assert "-p download True" in message and "--download" in message


def test_dispatch_download_offline_prints_the_message_without_a_traceback(offline, capsys):
    code = dispatch.main(["01", "--profile", "cpu", "--download", "--dry-run", "--results-dir", str(offline / "r")])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert err.startswith("dataset 'cifar10' could not be downloaded with download=True")


def test_run_all_passes_download_to_the_notebook_without_making_a_variant(tmp_path):
    study = STUDIES["01"]
    job = run_all.plan_job(study, profile="smoke", results_dir=str(tmp_path), parameters={}, download=True)
    plain = run_all.plan_job(study, profile="smoke", results_dir=str(tmp_path), parameters={})
    assert job.parameters["download"] is True and "download" not in plain.parameters
    assert job.variant is None and job.output_dir == plain.output_dir


@pytest.mark.parametrize("key", list(STUDIES))
def test_download_changes_no_run_id_and_makes_no_variant(tmp_path, key):
    plans = [dispatch.make_plan(key, profile="smoke", results_dir=str(tmp_path), download=d) for d in (False, True)]
    ids = [[p.store.run_id(c) for c in p.configs] for p in plans]
    assert ids[0] == ids[1] and ids[0]
    assert plans[0].variant is None and plans[1].variant is None
    # the notebook's own rule, with download set in its namespace
    study = STUDIES[key]
    namespace = {**notebook_defaults(study), "profile": "smoke", "download": True}
    assert variant_of(study, namespace, study.module.resolve(namespace)) == (None, {})


def test_download_is_set_by_its_own_option_not_by_p():
    with pytest.raises(ParameterError, match="download"):
        resolve_command(STUDIES["06"], profile="smoke", parameters={"download": True})


@pytest.mark.parametrize("notebook", sorted(ROOT.glob("notebooks/[0-9][0-9]_*.py")), ids=lambda p: p.stem)
def test_every_notebook_has_the_download_parameter_off_by_default(notebook):
    study = next(s for s in STUDIES.values() if s.notebook == notebook.stem)
    assert notebook_defaults(study)["download"] is False

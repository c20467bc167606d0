"""The fidelity table of studies 1-3 (lib.studies.fidelity): sources, notes, and values read from the live configs."""
import numpy as np
import pandas as pd
import pytest

from lib.cff.training import CFFConfig
from lib.core.params import ParameterError
from lib.studies import cross_dataset, difficulty_sweep, find_study, margin_factorial
from lib.studies.cff_fidelity import cff_fidelity_table
from lib.studies.fidelity import PROFILE_REASONS
from lib.studies.variants import notebook_defaults

# The files of HosseinAghagol/ContrastiveFF that studies 1-3 follow (its other files are other methods).
ORIGINAL_FILES = ("main_CFF.py", "utils.py", "models/vit.py", "losses.py")
TAGS = {"[code]", "[paper]", "[summary]", "[ours]"}


@pytest.fixture
def cifar10_root(tmp_path):
    """A prepared-arrays folder with a tiny CIFAR-10 of 20 training and 10 test images."""
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "cifar10.npz", x_train=rng.integers(0, 256, (20, 32, 32, 3), dtype=np.uint8),
             y_train=np.arange(20) % 10, x_test=rng.integers(0, 256, (10, 32, 32, 3), dtype=np.uint8),
             y_test=np.arange(10), classes=np.array([str(k) for k in range(10)]))
    return str(tmp_path)


def _resolved(module, profile: str, **parameters) -> tuple[dict, list[CFFConfig]]:
    s = module.resolve({**notebook_defaults(find_study(module)), "profile": profile, **parameters})
    return s, module.plan(s)


def _by_setting(table):
    return table.set_index("setting")


@pytest.mark.parametrize("module", [margin_factorial, cross_dataset, difficulty_sweep])
def test_every_row_is_tagged_every_code_row_names_an_original_file_and_every_difference_says_why(module):
    settings, configs = _resolved(module, "quick")
    table = cff_fidelity_table(configs, settings)
    assert set(table.evidence) <= TAGS
    code = table[table.evidence == "[code]"]
    assert len(code) > 20
    for _, row in code.iterrows():
        assert row.source.startswith(ORIGINAL_FILES), (row.setting, row.source)
    differs = table.ours != table.original
    assert differs.any() and (~differs).any()
    assert table[differs].note.str.startswith("[ours]: ").all()
    assert (table[~differs].note == "matches").all()


def test_a_changed_config_field_shows_up_as_a_difference_with_its_reason(tiny_cff):
    base = _by_setting(cff_fidelity_table(CFFConfig(**tiny_cff)))
    changed = _by_setting(cff_fidelity_table(CFFConfig(**{**tiny_cff, "lr": 0.01, "temperature": 0.3, "m0": 0.2,
                                                          "margin_mode": "subtract"})))
    assert base.loc["learning rate", "note"] == "matches"
    assert changed.loc["learning rate", "ours"] == "0.01"
    assert changed.loc["learning rate", "note"].startswith("[ours]: lr = 0.01")
    assert changed.loc["temperature τ", "note"].startswith("[ours]: temperature = 0.3")
    assert "m0 = 0.2" in changed.loc["margin schedule", "ours"]
    assert changed.loc["margin schedule", "note"].startswith("[ours]: m0 = 0.2")
    assert base.loc["margin modes run", "note"] == "matches"
    assert changed.loc["margin modes run", "ours"] == "subtract"


def test_training_images_are_the_runs_split_of_the_loaded_data(cifar10_root):
    config = CFFConfig(dataset="cifar10", layers=1, embed_dim=16, heads=2)
    rows = _by_setting(cff_fidelity_table(config, data_root=cifar10_root))
    assert rows.loc["training / test images (CIFAR-10)", "ours"] == "18 train / 10 test"  # 10% of 20 held out
    subset = _by_setting(cff_fidelity_table(config.replace(train_subset=5), data_root=cifar10_root))
    assert subset.loc["training / test images (CIFAR-10)", "ours"] == "5 train / 10 test"


# The rows the paper profile is meant to match: the model, the optimiser, the loss and the evaluation.
PAPER_ROWS = ("layers L", "embedding dimension E", "attention heads", "patch size", "learning rate", "weight decay",
              "batch size (images, two views each)", "epochs (stage 1)", "temperature τ", "margin schedule",
              "train / validation split", "probe optimiser", "probe epochs", "probe batch size",
              "image size and tokens (CIFAR-10)", "augmentation (CIFAR-10)", "normalisation (CIFAR-10)",
              "positives per anchor, balanced batch (CIFAR-10)")


def test_study1_paper_profile_matches_the_published_settings(cifar10_root):
    settings, configs = _resolved(margin_factorial, "paper")
    rows = _by_setting(cff_fidelity_table(configs, settings, data_root=cifar10_root))
    assert (rows.loc[list(PAPER_ROWS), "note"] == "matches").all(), rows.loc[list(PAPER_ROWS), ["ours", "original"]]


def test_a_reduced_profile_gives_its_reason_for_the_scale_it_reduces(cifar10_root):
    settings, configs = _resolved(margin_factorial, "cpu")
    rows = _by_setting(cff_fidelity_table(configs, settings, data_root=cifar10_root))
    cpu = f"[ours]: {PROFILE_REASONS['cpu']}"
    for setting in ("layers L", "embedding dimension E", "epochs (stage 1)", "batch size (images, two views each)"):
        assert (rows.loc[setting, "note"] == cpu) == (rows.loc[setting, "ours"] != rows.loc[setting, "original"])
    assert rows.loc["epochs (stage 1)", "note"] == cpu  # 600 epochs do not fit 2 hours on 2 cores


def test_configs_must_be_cff_configs():
    with pytest.raises(ParameterError, match="configs"):
        cff_fidelity_table([])
    with pytest.raises(ParameterError, match="configs"):
        cff_fidelity_table([{"dataset": "cifar10"}])


def test_a_fidelity_table_renders_to_the_same_html_every_time_with_no_index_or_address():
    """What a notebook displays (lib.studies.fidelity.as_html): a fixed table id where pandas draws a random one,
    no index column, and a plain-text form without a memory address."""
    import re

    from lib.studies.fidelity import as_html
    table = pd.DataFrame({"setting": ["lr", "batch size"], "ours": ["0.004", "512"], "note": ["matches", "[ours]: x"]})
    first, second = as_html(table), as_html(table.copy())
    assert first.data == second.data
    assert 'id="T_fidelity"' in first.data and not re.search(r"T_[0-9a-f]{5}\b", first.data)
    assert "row_heading" not in first.data  # no index column
    assert " at 0x" not in repr(first)
    assert first.data.startswith("<details><summary>2 settings beside the original's, 1 of them ours")

"""The claims declared once (each study's ``STATEMENTS``, docs/claims.md) against what the shipped tables decide: the
file is the declarations' output, every claim row names a declared statement of its own study, and every declared
statement is decided somewhere, or names the statement that decides the same experiment."""
import json
import re

import pytest

from lib import PROJECT_ROOT
from lib.core import verdicts
from lib.core.verdicts import Statement
from lib.studies import STUDIES, claims

TABLES = PROJECT_ROOT / "results" / "tables"


def test_docs_claims_is_generated_from_the_declarations():
    assert claims.PATH.read_text(encoding="utf-8") == claims.markdown(), "run python -m lib.studies.claims"


def test_statement_ids_are_unique_and_name_their_study():
    seen = set()
    for number, study in STUDIES.items():
        for s in study.module.STATEMENTS:
            assert s.id.startswith(f"s{int(number)}.") and s.id not in seen, s.id
            seen.add(s.id)
    with pytest.raises(ValueError, match="s<study>.<name>"):
        Statement("study2.vr", "p", "[paper]", "o")


@pytest.mark.parametrize("number", sorted(STUDIES))
def test_every_claim_the_shipped_tables_decide_names_a_declared_statement(number):
    """Each claim row of the shipped typed records (cpu and quick) carries the id of one of its study's declared
    statements (before any ':' part), and each declared statement is read by a row or decided elsewhere."""
    study = STUDIES[number]
    declared = {s.id: s for s in study.module.STATEMENTS}
    read = set()
    for profile in ("quick", "cpu"):
        path = TABLES / f"{study.notebook}_{profile}_verdicts.json"
        for record in json.loads(path.read_text(encoding="utf-8")):
            if record["kind"] != "claim":
                continue
            statement = verdicts.statement_id(record["id"])
            assert statement in declared, (profile, record["quantity"], record["id"])
            read.add(statement)
    every = {s.id for study_ in STUDIES.values() for s in study_.module.STATEMENTS}
    for s in declared.values():
        if s.decided:
            assert s.decided in every and not s.decided.startswith(s.id.split(".")[0] + "."), s.id
        else:
            assert s.id in read or s.ours.startswith("a check"), f"{s.id}: declared, never read"


@pytest.mark.parametrize("number", sorted(STUDIES))
def test_every_claim_row_tests_what_its_statement_declares(number):
    """Each claim row of the shipped typed records (cpu and quick) has the measure, family, published value and
    evidence tag its statement declares (the value of its part, where the statement has one per part): the rows
    are made from the declarations, not restated beside them."""
    study = STUDIES[number]
    declared = {s.id: s for s in study.module.STATEMENTS}
    for profile in ("quick", "cpu"):
        path = TABLES / f"{study.notebook}_{profile}_verdicts.json"
        for record in json.loads(path.read_text(encoding="utf-8")):
            statement = declared.get(verdicts.statement_id(record["id"]))
            if statement is None or record["kind"] == "check":
                continue  # a check of ours, or a number another study decides
            derived = {} if statement.published is not None else {"published": record["published"]}
            part = record["id"].partition("@")[0].partition(":")[2]
            claim = statement.claim(record["quantity"], part, **derived)
            kind = "exploratory" if record["kind"] == "exploratory" else claim.kind  # a version its plan did not hold
            assert (record["measure"], record["family"], record["kind"]) == (claim.measure, claim.family, kind)
            assert record["published"] == pytest.approx(claim.published, rel=1e-11), record["id"]
            if "evidence" not in statement.declared():
                continue  # the row derives its tag with its value (a contrast of the sets at hand)
            assert record["evidence"] == claim.evidence, record["id"]


def _statement(**test) -> Statement:
    return Statement("s1.x", "p", "[paper]", "o", **test)


def test_a_statement_makes_its_claim_and_refuses_what_it_declares_given_again():
    s = _statement(measure="variance_ratio", published=5.9, family="study 1", value_evidence="[summary]")
    claim = s.claim("VR", "car-matched", cells=(("dataset", "cifar10"),))
    assert (claim.measure, claim.published, claim.evidence, claim.family, claim.id) == (
        "variance_ratio", 5.9, "[summary]", "study 1", "s1.x:car-matched")
    with pytest.raises(ValueError, match="published declared by the statement"):
        s.claim("VR", published=2.0)
    with pytest.raises(ValueError, match="evidence declared by the statement"):
        s.claim("VR", evidence="[code]")
    per_part = _statement(measure="mean_difference", published={"90": 2.27, "100": 2.12}, family="f")
    assert per_part.claim("gain", "90").published == 2.27 and per_part.claim("gain", "100").id == "s1.x:100"
    with pytest.raises(ValueError, match="part='80' has no published value: one of 90, 100"):
        per_part.claim("gain", "80")
    with pytest.raises(ValueError, match="decided as s2.svhn_vr"):
        _statement(decided="s2.svhn_vr").claim("VR")
    with pytest.raises(ValueError, match="measure='ratios' is not allowed"):
        _statement(measure="ratios")


READING_BACK = re.compile(r"read_csv\([^)]*paper_vs_reproduced|open\([^)]*paper_vs_reproduced|"
                          r"verdict_text\b|verdict\w*\s*\.\s*(startswith|split|endswith|match)\(|"
                          r"\.n\.split\(\" vs \"\)|css_class\(|look_progress\(|\.plan_key\b|quantity\.str\.")


def test_no_module_reads_verdicts_back_from_text():
    """The reader's CSV and the verdict sentences are for people; lib.decide, the plans, the coverage, the report and
    the notebooks' tables read the typed records (``<study>_<profile>_verdicts.json``, full precision, rows keyed by
    id). Outside the engine that writes the sentences, no module opens the reader's table, parses a verdict sentence,
    splits the rounded seed counts or finds a row by its quantity's text: the report and the renderers included."""
    offenders = []
    for path in sorted((PROJECT_ROOT / "lib").rglob("*.py")):
        name = path.relative_to(PROJECT_ROOT).as_posix()
        if name == "lib/core/verdicts.py":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if READING_BACK.search(line):
                offenders.append(f"{name}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)
    assert READING_BACK.search('verdict.startswith("reproduced")') and READING_BACK.search("row.n.split(\" vs \")")
    assert READING_BACK.search('frame[frame.quantity.str.startswith(module.HEADLINE)]')  # a row found by its label
    assert READING_BACK.search('pd.read_csv(root / f"{study}_paper_vs_reproduced.csv")')

"""The claims declared once (each study's ``STATEMENTS``, docs/claims.md) against what the shipped tables decide: the
file is the declarations' output, every claim row names a declared statement of its own study, and every declared
statement is decided somewhere, or names the statement that decides the same experiment."""
import json

import pytest

from lib import PROJECT_ROOT
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
            statement = record["id"].split(":")[0]
            assert statement in declared, (profile, record["quantity"], record["id"])
            read.add(statement)
    every = {s.id for study_ in STUDIES.values() for s in study_.module.STATEMENTS}
    for s in declared.values():
        if s.decided:
            assert s.decided in every and not s.decided.startswith(s.id.split(".")[0] + "."), s.id
        else:
            assert s.id in read or s.ours.startswith("a check"), f"{s.id}: declared, never read"

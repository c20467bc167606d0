"""Mutation check: plant each known bug in a copy of the project and show that a test catches it.

    python -m tests.mutation_check            # every mutation (about 10 minutes on two cores)
    python -m tests.mutation_check vr flat    # those whose name contains "vr" or "flat"

Each mutation is a list of exact text replacements in one file and the tests expected to catch it.
The project (tracked and untracked, not ignored files) is copied to a temporary folder once; each
mutation is applied there, its tests are run with ``pytest -x``, and the file is restored. A
mutation is *caught* when pytest fails. A replacement whose text is not found exactly once fails the
check loudly, so the list cannot silently go stale when the code changes (tests/test_mutation_list.py
checks that in the suite, in a second). Exit status 1 if any mutation survives. Not part of the test
suite (it runs the suite's tests many times over); the planted bugs are those of issue 14 and the
value tests written for it.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutation:
    name: str
    bug: str
    path: str
    replacements: tuple[tuple[str, str], ...]
    tests: tuple[str, ...]


MUTATIONS = (
    # 1. the headline ratio
    Mutation("vr_upside_down", "VR computed as Var(subtract)/Var(clamp)", "lib/studies/common.py",
             (("variance=variance_comparison(a, b)", "variance=variance_comparison(b, a)"),),
             ("tests/test_analyses_cff.py",)),
    Mutation("vr_test_swapped", "variance_comparison tests Var(b)/Var(a)", "lib/studies/common.py",
             (("vr = stats.variance_ratio_test(a, b)", "vr = stats.variance_ratio_test(b, a)"),),
             ("tests/test_analyses_cff.py",)),
    Mutation("dose_upside_down", "study 1's dose-response VR upside down", "lib/studies/margin_factorial.py",
             (('out["dose"] = variance_comparison(100 * out["dose_seeds"].top1.to_numpy(), b)',
               'out["dose"] = variance_comparison(b, 100 * out["dose_seeds"].top1.to_numpy())'),),
             ("tests/test_analyses_cff.py",)),
    Mutation("twins_miscounted", "study 1 counts differing detach/direct pairs as identical twins",
             "lib/studies/margin_factorial.py",
             (('"identical": int((diff == 0).sum())', '"identical": int((diff != 0).sum())'),),
             ("tests/test_analyses_cff.py",)),
    Mutation("verdict_threshold", "the verdict engine calls p < 0.5 significant", "lib/core/verdicts.py",
             (("    out = [replace(a, p_holm=ph, verdict=verdict(a, ph < ALPHA if math.isfinite(ph) else",
               "    out = [replace(a, p_holm=ph, verdict=verdict(a, ph < 0.5 if math.isfinite(ph) else"),),
             ("tests/test_verdicts.py",)),
    Mutation("car_not_percent", "study 2 reports CAR as a fraction", "lib/studies/cross_dataset.py",
             (('row[f"car0_{mode}"] = 100 * arm.car_layer0.mean()', 'row[f"car0_{mode}"] = arm.car_layer0.mean()'),),
             ("tests/test_analyses_cff.py",)),
    Mutation("level_filter", "study 3 analyses every level but the one it names", "lib/studies/difficulty_sweep.py",
             (("ok = runs[(runs.level == level) & (runs.status == \"ok\")]",
               "ok = runs[(runs.level != level) & (runs.status == \"ok\")]"),),
             ("tests/test_analyses_cff.py",)),
    # 2. study 5's gradient identity, through the library's FlatNCE
    Mutation("flatnce_gradient_negated", "lib.core.losses.flat_nce's gradient negated", "lib/core/losses.py",
             (("return torch.exp(v - v.detach()).mean()", "return (2 - torch.exp(v - v.detach())).mean()"),),
             ("tests/test_flatnce_study.py",)),
    Mutation("flatnce_diff_sign", "study 5's difference is InfoNCE - FlatNCE", "lib/studies/flatnce_batch.py",
             (('row[f"{short}_diff"] = a.mean() - c.mean()', 'row[f"{short}_diff"] = c.mean() - a.mean()'),),
             ("tests/test_analyses_ssl.py",)),
    Mutation("flatnce_small_batch", "study 5's small-batch claim takes the largest batch minus the smallest",
             "lib/studies/flatnce_batch.py",
             (("(wide[small] - wide[large])", "(wide[large] - wide[small])"),),
             ("tests/test_analyses_ssl.py",)),
    Mutation("flatnce_seed_mean", "study 5's central claim pools runs instead of averaging each seed",
             "lib/studies/flatnce_batch.py",
             (('complete.groupby("seed")[metric].mean()', 'complete.groupby("run_id")[metric].mean()'),),
             ("tests/test_analyses_ssl.py",)),
    Mutation("norms_slope_axes", "study 4 fits rho on steps instead of steps on rho", "lib/studies/embedding_norms.py",
             (("loglog_slope(ok.rho, ok.steps)", "loglog_slope(ok.steps, ok.rho)"),),
             ("tests/test_analyses_ssl.py",)),
    Mutation("norms_auroc_gain", "study 4's OOD claim takes initial minus trained AUROC",
             "lib/studies/embedding_norms.py",
             (('gain=group[f"auroc_{label}"] - group[init]', 'gain=group[init] - group[f"auroc_{label}"]'),),
             ("tests/test_analyses_ssl.py",)),
    Mutation("norms_auroc_swapped", "stats.auroc scores out-of-distribution samples as in", "lib/core/stats.py",
             (("a, b = np.asarray(in_scores, dtype=float).ravel(), np.asarray(out_scores, dtype=float).ravel()",
               "b, a = np.asarray(in_scores, dtype=float).ravel(), np.asarray(out_scores, dtype=float).ravel()"),),
             ("tests/test_analyses_ssl.py",)),
    Mutation("norms_vs_default_sign", "study 4's change against the default run has its sign flipped",
             "lib/studies/embedding_norms.py",
             (("[table[metric].iloc[i] - default.get(key, np.nan) for",
               "[default.get(key, np.nan) - table[metric].iloc[i] for"),),
             ("tests/test_analyses_ssl.py",)),
    # 3. kill trials that land part-way
    Mutation("records_buffered", "a sweep writes its records only when it ends (a kill loses every finished run)",
             "lib/run/sweep.py",
             (("    def record(config, outcome, batched=None, key=None):\n"
               "        record_run(store, train_fn, config, outcome, data_root, batched, extra)\n",
               "    pending = []\n\n    def record(config, outcome, batched=None, key=None):\n"
               "        pending.append((config, outcome, batched))\n"),
              ("    sweep.close()\n", "    sweep.close()\n    for config, outcome, batched in pending:\n"
                                     "        record_run(store, train_fn, config, outcome, data_root, batched, "
                                     "extra)\n")),
             ("tests/test_sweep.py::test_a_sweep_killed_where_chosen_resumes_to_the_uninterrupted_table",)),
    Mutation("stale_temp_kept", "a temp file of a writer killed mid-write is never removed", "lib/run/sweep.py",
             (("    store.remove_stale_temp_files()", "    pass"),),
             ("tests/test_sweep.py::test_a_sweep_killed_where_chosen_resumes_to_the_uninterrupted_table",)),
    # 4. the validators reject what they should
    Mutation("number_accepts_any", "params.number accepts any number (NaN, inf, negatives, out of range)",
             "lib/core/params.py",
             (("    ok = ok and (value > low if low_open else value >= low) and value <= high\n", ""),
              ("and not isinstance(value, bool) and _finite(value)", "")),
             ("tests/test_parameters.py",)),
    Mutation("number_no_upper_bound", "params.number ignores its upper bound", "lib/core/params.py",
             ((" and value <= high\n", "\n"),),
             ("tests/test_parameters.py",)),
    Mutation("integer_off_by_one", "params.integer accepts minimum - 1", "lib/core/params.py",
             (("not isinstance(value, int) or value < minimum:",
               "not isinstance(value, int) or value < minimum - 1:"),),
             ("tests/test_parameters.py",)),
    Mutation("flag_accepts_any", "params.flag accepts any value", "lib/core/params.py",
             (("    if not isinstance(value, bool):\n        fail(name, value, \"True or False\")",
               "    if False:\n        fail(name, value, \"True or False\")"),),
             ("tests/test_parameters.py",)),
    Mutation("seeds_unbounded", "params.seeds has no upper bound", "lib/core/params.py",
             (("not minimum <= value <= MAX_SEEDS:", "not minimum <= value:"),),
             ("tests/test_parameters.py::test_every_domain_edge_is_accepted_or_rejected_as_the_reference_says",)),
    # 5. statistics' edge paths
    Mutation("bootstrap_keeps_degenerate", "bootstrap keeps the 0/0 resamples", "lib/core/stats.py",
             (("    ratios = ratios[~np.isnan(ratios)]  # 0/0: no ratio (see above)\n", ""),),
             ("tests/test_stats.py",)),
    Mutation("anova_empty_cell", "two-way ANOVA fits the interaction model with an empty cell", "lib/core/stats.py",
             (("if n_cells < la * lb:", "if False:"),),
             ("tests/test_stats.py",)),
    Mutation("anova_one_per_cell", "two-way ANOVA fits the interaction model with one observation per cell",
             "lib/core/stats.py",
             (("elif len(data) <= la * lb:", "elif False:"),),
             ("tests/test_stats.py",)),
    # 6. results-store guards
    Mutation("schema_unchecked", "records of another schema version are read", "lib/run/results.py",
             (('if rec["schema_version"] != SCHEMA_VERSION:', "if False:"),),
             ("tests/test_results.py",)),
    Mutation("collision_unguarded", "a record holding another config under the same hash counts as finished",
             "lib/run/results.py",
             (('if config_json(rec["config"]) != config_json(config):  # hash collision guard', "if False:"),),
             ("tests/test_results.py",)),
    # 7. weak assertions made strict
    Mutation("device_mislabelled", "environment() records a CPU run's device as 'gpu'", "lib/run/provenance.py",
             (('device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"',
               'device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "gpu"'),),
             ("tests/test_results.py",)),
    Mutation("parallel_loses_runs", "a parallel sweep runs and returns only its first config", "lib/run/sweep.py",
             (("futures = {pool.submit(_run_in_worker, train_fn, c, data_root, store.run_id(c)): c for c in todo}",
               "futures = {pool.submit(_run_in_worker, train_fn, c, data_root, store.run_id(c)): c for c in todo[:1]}"),
              ("    return [store.load(run_id) for run_id in unique]",
               "    return [r for r in (store.load(run_id) for run_id in unique) if r is not None]")),
             ("tests/test_sweep.py::test_parallel_workers_give_the_same_records_as_one_process",)),
    # 8. verdicts at few seeds (issue 37): each planted on a design the studies use or users will run
    Mutation("ci_at_alpha_in_a_family", "decide() keeps the 95% interval in a family of m instead of alpha / m",
             "lib/core/verdicts.py",
             (("                a = replace(a, ci=a.interval_at(here))", "                a = replace(a, ci=a.ci)"),),
             ("tests/test_verdicts.py",)),
    # rule6_either_side (an interval wholly *beyond* the published value read as not reproduced) is gone since issue
    # 48: it changes no verdict we can construct. An interval at the claim's level that lies beyond the published value,
    # on its side of the null, excludes the null, so a t-based test rejects there (Holm's adjusted p included); a
    # variance ratio's F interval can, where Brown–Forsythe does not reject 1, but its *not reproduced* now also needs
    # Brown–Forsythe to reject the published ratio, which lies nearer to the estimate than 1 does.
    Mutation("power_rule6", "rule 6 again fires on power alone", "lib/core/verdicts.py",
             (('    return "not reproduced" if short else "inconclusive"',
               '    return "not reproduced" if short or assessment.power >= TARGET_POWER else "inconclusive"'),),
             ("tests/test_verdicts.py",)),
    Mutation("two_seeds_decide", "two seeds per arm decide a claim", "lib/core/verdicts.py",
             (("MIN_SEEDS = 3 ", "MIN_SEEDS = 2 "),),
             ("tests/test_verdicts.py",)),
    Mutation("sd_as_observed", "the power takes the observed SD, which two agreeing seeds collapse",
             "lib/core/verdicts.py",
             (("    return sd * math.sqrt(df / _st.chi2.ppf(1 - SD_CONFIDENCE, df))", "    return sd"),),
             ("tests/test_verdicts.py",)),
    Mutation("contrast_others_swapped", "the contrast's reference swaps the other sets' arms (seen only when unequal)",
             "lib/core/verdicts.py",
             (("        terms += [(-1.0 / k, m_a - 1), (1.0 / k, m_b - 1)]",
               "        terms += [(-1.0 / k, m_b - 1), (1.0 / k, m_a - 1)]"),),
             ("tests/test_verdicts.py",)),
    Mutation("contrast_normal_theory", "the contrast's reference is the normal approximation of each log variance",
             "lib/core/stats.py",
             (("        mass = np.exp(log_density)\n", "        mass = np.exp(-y ** 2 * nu / 4)  # N(0, 2 / nu)\n"),),
             ("tests/test_verdicts.py",)),
    Mutation("contrast_seeds_two_sets", "the contrast's seeds-needed assumes two datasets whatever the design",
             "lib/core/verdicts.py",
             (("_seeds_needed(lambda m: contrast_power(effect, [(m, m)] * len(sizes), alpha))",
               "_seeds_needed(lambda m: contrast_power(effect, [(m, m)] * 2, alpha))"),),
             ("tests/test_verdicts.py",)),
    Mutation("families_merged", "decide() corrects every claim as one family", "lib/core/verdicts.py",
             (("            families.setdefault(a.claim.family, []).append(i)",
               "            families.setdefault(\"\", []).append(i)"),),
             ("tests/test_verdicts.py",)),
    Mutation("brown_forsythe_ignored", "a variance ratio's p is the F-test's alone", "lib/core/verdicts.py",
             (("    p = max(p_f, p_bf) if math.isfinite(p_bf) else p_f", "    p = p_f"),),
             ("tests/test_verdicts.py",)),
    Mutation("ratio_power_raw_scale", "a ratio's power is taken at the published ratio minus 1, not its log",
             "lib/core/verdicts.py",
             (("        return math.exp(lo), math.exp(hi)\n    effect = math.log(claim.published / claim.null_value)",
               "        return math.exp(lo), math.exp(hi)\n    effect = claim.published / claim.null_value - 1"),),
             ("tests/test_verdicts.py",)),
    Mutation("twins_first_only", "by_seed keeps a seed's first run instead of the mean of its twins",
             "lib/core/verdicts.py",
             (("    means = frame.groupby(seed)[value].mean()", "    means = frame.groupby(seed)[value].first()"),),
             ("tests/test_verdicts.py",)),
    Mutation("regime_ignored", "a claim outside the paper's stated regime is judged anyway", "lib/core/verdicts.py",
             (("    if not assessment.in_regime:\n        return OUT_OF_REGIME\n", ""),),
             ("tests/test_verdicts.py",)),
    Mutation("welch_pooled_df", "Welch's interval takes the pooled df, wrong on unequal arms", "lib/core/verdicts.py",
             (("    df = (va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1))\n\n    def interval_at",
               "    df = a.size + b.size - 2\n\n    def interval_at"),),
             ("tests/test_verdicts.py",)),
    Mutation("power_one_tail", "the F-test power puts all of alpha in each tail", "lib/core/stats.py",
             (("f_hi = _st.f.isf(alpha / 2, d1, d2)\n    f_lo = _st.f.ppf(alpha / 2, d1, d2)",
               "f_hi = _st.f.isf(alpha, d1, d2)\n    f_lo = _st.f.ppf(alpha, d1, d2)"),),
             ("tests/test_stats.py::test_variance_ratio_power_with_two_seeds_per_arm_is_the_closed_form",)),
    # issue 38: two looks
    Mutation("look_two_at_alpha", "look 2 tested at the full level: optional stopping",
             "lib/core/sequential.py",
             (("return Boundaries(n1, n2, alpha, float(2 * _st.norm.sf(c1)), float(2 * _st.norm.sf(c2)))",
               "return Boundaries(n1, n2, alpha, alpha, alpha)"),),
             ("tests/test_sequential.py",)),
    Mutation("z_for_t", "the looks' one-sample p from the normal, not the t: too many rejections at 3 seeds",
             "lib/core/sequential.py",
             (("    return 2 * _st.t.sf(np.abs(mean) / (sd / math.sqrt(n)), n - 1)",
               "    return 2 * _st.norm.sf(np.abs(mean) / (sd / math.sqrt(n)))"),),
             ("tests/test_sequential.py",)),
    Mutation("look_two_on_all_seeds", "look 2 read on every recorded seed, not the planned ones",
             "lib/core/looks.py",
             (("second = table_of(runs[runs.run_id.isin(set(shipped.run_id) | ids)],", "second = table_of(runs,"),),
             ("tests/test_decide.py",)),
    Mutation("pending_at_one_look", "a claim whose look 2 is running keeps its one-look verdict",
             "lib/core/looks.py",
             (("table = table_of(shipped, {c.id: Look(c.design, 1) for c in claims})",
               "table = table_of(shipped, {})"),),
             ("tests/test_decide.py",)),
    Mutation("unpaired", "the paired measure ignores the seeds: a Welch test on the arms",
             "lib/core/verdicts.py",
             (("    return _one_sample(shifted, a - b, sd_floor)",
               "    return _mean_difference(claim, a, b, sd_floor)"),),
             ("tests/test_decide.py",)),
    Mutation("plan_twice", "a claim already in a plan is planned again", "lib/studies/extension.py",
             (("    if c.key in planned:", "    if c.key in planned and False:"),),
             ("tests/test_decide.py",)),
    Mutation("budget_shared_twice", "a run two claims share is paid for twice", "lib/studies/extension.py",
             (("        return sum(s for rid, s in c.seconds.items() if rid not in runs) / workers[c.study.name] "
               "/ 3600",
               "        return sum(c.seconds.values()) / workers[c.study.name] / 3600"),),
             ("tests/test_decide.py",)),
    Mutation("added_field_hashed", "a field added later enters the run id at its default", "lib/core/config.py",
             (("                if not added_at_default(f, getattr(config, f.name))}",
               "                if True}"),),
             ("tests/test_plans.py",)),
    # issue 48: the claim the paper states, every condition, one experiment, both kinds of decision, plans first
    Mutation("conditions_first_only", "a claim with several conditions is judged on its first one alone",
             "lib/core/verdicts.py",
             (("        return values is not None and any(part.misses(v) for part, v in zip(self.parts, values))",
               "        return values is not None and self.parts[0].misses(values[0])"),),
             ("tests/test_verdicts.py", "tests/test_analyses_cff.py")),
    Mutation("ease_ignored", "study 2's easy sets carry no accuracy condition (the old one-sided regime)",
             "lib/studies/cross_dataset.py",
             (('    if "acc" in pub:\n        return common.ease_regime(pub["acc"], pub["acc_tag"])\n', ""),),
             ("tests/test_analyses_cff.py",)),
    Mutation("reversal_without_parts", "the reversal inherits no condition from its parts",
             "lib/studies/cross_dataset.py",
             (("            published=contrast, regime=conditions,",
               "            published=contrast,"),),
             ("tests/test_analyses_cff.py",)),
    Mutation("ood_gain_as_claim", "study 4's OOD claim reads the gain over initialisation, not the trained AUROC",
             "lib/studies/embedding_norms.py",
             (('            trained = one_seed(claim, seed_values(group, f"auroc_{label}"))',
               '            trained = one_seed(claim, {k: v + 0.5 for k, v in seed_values(gain, "gain").items()})'),),
             ("tests/test_analyses_ssl.py",)),
    Mutation("owned_twice", "study 3 decides the 97% point that study 2 owns: one experiment, two verdicts",
             "lib/studies/difficulty_sweep.py",
             (('            claim = verdicts.Claim(quantity, "variance_ratio", vr, tag, kind="check")',
               '            claim = verdicts.Claim(quantity, "variance_ratio", vr, tag, FAMILY, id="s3.vr_97")'),
              ("        if acc in OWNED_ELSEWHERE:\n            shown", "        if False:\n            shown")),
             ("tests/test_studies_2_3.py",)),
    Mutation("not_reproduced_f_only", "a variance ratio's *not reproduced* on the F interval alone",
             "lib/core/verdicts.py",
             (('        short = assessment.notes.get("p_brown_forsythe_published", 1.0) < assessment.level',
               "        short = True"),),
             ("tests/test_verdicts.py", "tests/test_sequential.py")),
    Mutation("not_reproduced_at_look_one", "*not reproduced* read at look 1 of a planned claim as well",
             "lib/core/verdicts.py",
             (("            and looks[a.claim.key].number == 1 else a for a in out]",
               "            and looks[a.claim.key].number == 0 else a for a in out]"),),
             ("tests/test_verdicts.py",)),
    Mutation("plan_after_runs", "the store records a plan some of whose runs already have records",
             "lib/run/plans.py",
             (("        if early:\n            raise PlanAfterRunsError(",
               "        if False:\n            raise PlanAfterRunsError("),),
             ("tests/test_decide.py",)),
    Mutation("early_runs_read", "a plan is read with the runs recorded before it", "lib/run/plans.py",
             (('        early = {r["run_id"] for r in done if r["written_at"] < plan["written_at"]}',
               '        early = {r["run_id"] for r in done if r["written_at"] < ""}'),),
             ("tests/test_decide.py",)),
    Mutation("look2_row_kept", "a claim missing from the look-2 table keeps its look-1 row, labelled look 2",
             "lib/core/looks.py",
             (("never label a row look 2 that was not read there\n                raise ValueError(",
               "never label a row look 2 that was not read there\n                continue\n"
               "                raise ValueError("),),
             ("tests/test_decide.py",)),
    # plans that bind (issues 55 and 56): a planned claim found by its id, read under the test it registered
    Mutation("claim_keyed_by_label", "the two-look reading finds a planned claim by its label, not its id",
             "lib/core/looks.py",
             (('        where = frame.index[(frame["id"] == c.id) & (frame["kind"] == "claim")]',
               '        where = frame.index[(frame["quantity"] == c.quantity) & (frame["kind"] == "claim")]'),),
             ("tests/test_decide.py",)),
    Mutation("plan_read_under_another_test", "a planned claim's row may read another measure than its plan registered",
             "lib/core/looks.py",
             (("        for i in where:\n            _as_registered(frame.loc[i], c)",
               "        for i in where:\n            pass"),),
             ("tests/test_decide.py",)),
    Mutation("plan_content_unchecked", "a plan file's id is not the hash of its registered design",
             "lib/run/plans.py",
             (("    return config_hash(design)", "    return plan[\"plan_id\"]"),),
             ("tests/test_decide.py",)),
    # claims made from their declarations (issue 48, point 1), and no claim read on two seeds (issue 49)
    Mutation("statement_tag_ignored", "a row's claim takes the statement's tag, not the published value's own",
             "lib/core/verdicts.py",
             (("        fields = dict(published=published, evidence=self.value_evidence or self.evidence,",
               "        fields = dict(published=published, evidence=self.evidence,"),),
             ("tests/test_claims.py",)),
    Mutation("statement_restated", "a row may give again what its statement declares (a second published value)",
             "lib/core/verdicts.py",
             (("        twice = sorted(set(instance) & self.declared())", "        twice = []"),),
             ("tests/test_claims.py",)),
    Mutation("two_seeds_read", "study 5 reads its claims on 2 seeds an arm", "lib/studies/flatnce_batch.py",
             (("        if a.measured and min(a.n) < verdicts.MIN_SEEDS else a for a in tested]",
               "        if a.measured and min(a.n) < 2 else a for a in tested]"),),
             ("tests/test_flatnce_study.py",)),
)


def copy_project(target: Path) -> None:
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout.split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def apply(text: str, m: Mutation) -> str:
    for old, new in m.replacements:
        if text.count(old) != 1:
            raise SystemExit(f"mutation {m.name}: {old!r} occurs {text.count(old)} times in {m.path}, not once; "
                             "update tests/mutation_check.py")
        text = text.replace(old, new)
    return text


def first_failure(output: str) -> str:
    for line in output.splitlines():
        if line.startswith(("FAILED ", "ERROR ")):
            return line.split(" ", 1)[1].split(" - ")[0]
    return "(pytest failed; see its output)"


def main(argv: list[str]) -> int:
    chosen = [m for m in MUTATIONS if not argv or any(a in m.name for a in argv)]
    survived = []
    with tempfile.TemporaryDirectory(prefix="mutation_check_") as tmp:
        copy = Path(tmp)
        copy_project(copy)
        print(f"{'mutation':<28} {'result':<9} {'s':>5}  caught by")
        for m in chosen:
            path = copy / m.path
            original = path.read_text()
            path.write_text(apply(original, m))
            t0 = time.perf_counter()
            try:
                run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *m.tests],
                                     cwd=copy, capture_output=True, text=True)
            finally:
                path.write_text(original)
            caught = run.returncode != 0
            if not caught:
                survived.append(m)
            where = first_failure(run.stdout) if caught else "nothing: " + ", ".join(m.tests)
            print(f"{m.name:<28} {'caught' if caught else 'SURVIVED':<9} {time.perf_counter() - t0:5.0f}  {where}")
            print(f"{'':<28} ({m.bug})", flush=True)
    if survived:
        print(f"\n{len(survived)} of {len(chosen)} mutations survived: {', '.join(m.name for m in survived)}")
        return 1
    print(f"\nall {len(chosen)} mutations caught")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

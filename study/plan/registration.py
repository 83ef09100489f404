"""Pre-registration, checked against git history: a plan declared ``before_runs`` must have been committed, with
every field it declares, before the first commit of the runs it judges.

The declared fields (:func:`declared_fields`) are what a reader could suspect of being chosen after seeing the
results: the claims, their conditions, controls, fractions and roles, the smallest effects, alpha, power, the plan's
seeds and test images, and the design they rest on (seeds, fractions, models, budget, distillation, the probes'
seed). Their digest identifies the plan. :func:`registration` walks the parameters file's commits for the first
one holding that digest (the plan's commit), and the runs table's commits for the first one recording a run of
the plan's seeds (the runs' commit):

- **registered** — the plan's commit precedes the runs' commit in history (or the runs are not committed yet, and
  the plan is committed: they come after it);
- **changed after the runs** — a plan was committed before the runs, but the declared fields differ from it now:
  the verdicts are demoted to exploratory and the stage says so;
- **unverifiable** — the parameters file is outside any git repository;
- otherwise the plan stage refuses ``before_runs`` with a one-line error.

Runs through ``git`` (log, show, merge-base); nothing is cached, so the check is as fresh as the history.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from study.core.errors import StudyError

REGISTERED, CHANGED, UNVERIFIABLE = "registered", "changed after the runs", "unverifiable"
RUNS_TABLE = "reports/tables/robustness/plan_runs.csv"  # the per-run scores the plan judges
_DESIGN = ("data", "fractions", "seeds", "baselines", "distill", "models", "budget")
_UNDECLARED = ("declared", "history")  # the plan's own record of when it was written, not a field it declares


def declared_fields(raw: dict) -> dict:
    """The fields a plan declares, from a raw parameters mapping (see the module docstring)."""
    analysis = raw.get("analysis") or {}
    plan = {k: v for k, v in (analysis.get("plan") or {}).items() if k not in _UNDECLARED}
    probes = (analysis.get("robustness") or {}).get("seed")
    return {"plan": plan, "probe_seed": probes, **{k: raw.get(k) for k in _DESIGN}}


def plan_digest(raw: dict) -> str:
    """The SHA-256 of the declared fields, written as canonical JSON (sorted keys): equal fields, equal digest."""
    text = json.dumps(declared_fields(raw), sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Registration:
    status: str
    digest: str
    plan_commit: str = ""  # the first commit holding the declared fields ("" where none)
    plan_date: str = ""
    runs_commit: str = ""  # the first commit recording a run of the plan's seeds ("" where none yet)
    runs_date: str = ""
    message: str = ""  # what the stage prints about it


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True, timeout=60).stdout


def _history(root: Path, path: str) -> list[tuple[str, str]]:
    """(commit, ISO date) of every commit touching ``path``, oldest first; [] outside git or without any."""
    try:
        out = _git(root, "log", "--reverse", "--format=%H %cI", "--", path)
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired):
        return []
    return [tuple(line.split(" ", 1)) for line in out.splitlines() if line.strip()]


def _show(root: Path, commit: str, path: str) -> str | None:
    try:
        return _git(root, "show", f"{commit}:{path}")
    except subprocess.CalledProcessError:
        return None  # deleted in that commit


def _runs_commit(root: Path, seeds: set[int]) -> tuple[str, str]:
    """The first commit whose runs table holds a row of one of ``seeds``."""
    for commit, date in _history(root, RUNS_TABLE):
        text = _show(root, commit, RUNS_TABLE)
        if text and any(int(float(row["seed"])) in seeds for row in csv.DictReader(io.StringIO(text))
                        if row.get("seed") not in (None, "")):
            return commit, date
    return "", ""


def _before(root: Path, first: str, second: str) -> bool:
    """Whether commit ``first`` is a proper ancestor of ``second``."""
    if first == second:
        return False
    return subprocess.run(["git", "merge-base", "--is-ancestor", first, second], cwd=root,
                          capture_output=True).returncode == 0


def registration(params_file: Path, raw: dict) -> Registration:
    """Check a ``before_runs`` plan in ``params_file`` (parsed: ``raw``) against its project's git history (module
    docstring); raises a one-line StudyError where no plan was committed before the runs."""
    digest = plan_digest(raw)
    params_file = params_file.resolve()
    root = params_file.parent
    try:
        top = Path(_git(root, "rev-parse", "--show-toplevel").strip())
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired):
        return Registration(UNVERIFIABLE, digest, message=f"{params_file.name} is not in a git repository")
    rel = params_file.relative_to(top).as_posix()
    commits = _history(top, rel)
    seeds = {int(s) for s in raw.get("seeds") or []}
    runs, runs_date = _runs_commit(top, seeds)
    declared = []  # (commit, date, digest, declared) of each version of the file
    for commit, date in commits:
        text = _show(top, commit, rel)
        version = yaml.safe_load(text) if text else None
        if isinstance(version, dict):
            plan = ((version.get("analysis") or {}).get("plan") or {})
            declared.append((commit, date, plan_digest(version), plan.get("declared")))
    same = [(c, d) for c, d, g, _ in declared if g == digest]
    plan_commit, plan_date = same[0] if same else ("", "")
    fix = f"commit {rel} before the runs it judges, or declare analysis.plan.declared: after_runs"
    if not runs:
        if not plan_commit:
            raise StudyError(f"{rel}: analysis.plan is declared before_runs but its declared fields are in no commit; "
                             f"{fix}")
        return Registration(REGISTERED, digest, plan_commit, plan_date,
                            message=f"plan committed in {plan_commit[:7]} ({plan_date}); its runs not yet committed")
    if plan_commit and _before(top, plan_commit, runs):
        return Registration(REGISTERED, digest, plan_commit, plan_date, runs, runs_date,
                            message=f"plan committed in {plan_commit[:7]} ({plan_date}), before its runs' first "
                                    f"commit {runs[:7]} ({runs_date})")
    earlier = [(c, d) for c, d, _, how in declared if how == "before_runs" and _before(top, c, runs)]
    if earlier:
        last, last_date = earlier[-1]
        return Registration(CHANGED, digest, last, last_date, runs, runs_date,
                            message=f"declared fields changed after the runs' first commit {runs[:7]} ({runs_date}): "
                                    f"they differ from the plan committed in {last[:7]}; every verdict is exploratory")
    raise StudyError(f"{rel}: analysis.plan is declared before_runs but no plan was committed before its runs' first "
                     f"commit {runs[:7]}; declare analysis.plan.declared: after_runs")

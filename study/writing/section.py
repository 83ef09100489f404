"""What a question's part of the report reads, and the Markdown pieces every part is made of.

Each question package words its own parts of ``report.md`` in ``study/<question>/report.py``, from the files its
stage wrote under names defined once in the package (``study/<question>/__init__.py``). A part reads them through
:class:`Sources`: the analysis tables and figures, the report stage's own setup tables, the report's folder (figure
links are relative to it) and the study's parameters as the report words them (``setup``,
:func:`study.report.stage.setup_facts`). :class:`Part` pairs the function that writes a part with the tables it
cannot do without: where one is absent (a study without distillation, without a budget check, without ConViT, or
one that ran only some analysis stages) the study has no such part, and the report leaves it out.
:mod:`study.report.contents` lists the parts in the report's order.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd

from study.outputs.tables import read_table


@dataclass(frozen=True)
class Sources:
    """Where a study's outputs are: ``tables`` and ``figures`` hold one folder per analysis stage, ``setup_tables``
    the tables the report stage derives, ``report_dir`` the report (figure links are relative to it)."""
    tables: Path
    setup_tables: Path
    figures: Path
    report_dir: Path
    setup: dict

    def table(self, folder: str, name: str) -> pd.DataFrame:
        """The analysis table ``<tables>/<folder>/<name>.csv``, one a part needs (:attr:`Part.needs`)."""
        return pd.read_csv(self.tables / folder / f"{name}.csv")

    def table_if_written(self, folder: str, name: str) -> pd.DataFrame | None:
        """The analysis table ``<tables>/<folder>/<name>.csv``, or ``None`` where the study's stage did not write it."""
        return read_table(self.tables / folder / f"{name}.csv")

    def has(self, folder: str, name: str) -> bool:
        return (self.tables / folder / f"{name}.csv").is_file()

    def setup_table(self, name: str) -> pd.DataFrame:
        """A table the report stage derives from the runs (:mod:`study.report.setup`)."""
        return pd.read_csv(self.setup_tables / f"{name}.csv")

    def setup_table_if_written(self, name: str) -> pd.DataFrame | None:
        """A table the report stage derives from another stage's tables, or ``None`` where those were not written."""
        return read_table(self.setup_tables / f"{name}.csv")

    def figure(self, folder: str, stem: str, caption: str) -> str:
        """The figure ``<figures>/<folder>/<stem>.png`` with its caption, or "" where the stage drew none."""
        return figure(self.figures / folder / f"{stem}.png", self.report_dir, caption)

    def figures_starting(self, folder: str, prefix: str) -> list[Path]:
        """Every figure of ``folder`` whose stem starts with ``prefix_``, sorted by name."""
        return sorted((self.figures / folder).glob(f"{prefix}_*.png"))


@dataclass(frozen=True)
class Part:
    """One question's share of a part of the report: ``write`` gives its lines from the sources (sentences under a
    findings heading or among the limitations, Markdown lines for a section of its own); ``needs`` names the tables
    (folder, stem) without which the study has no such part, and gets none."""
    write: Callable[[Sources], list[str]]
    needs: tuple[tuple[str, str], ...] = ()

    def lines(self, sources: Sources) -> list[str]:
        return self.write(sources) if all(sources.has(*table) for table in self.needs) else []


@dataclass(frozen=True)
class Rows:
    """One question's rows of the findings table that opens the report: ``write`` gives dicts of
    :data:`FINDINGS_COLUMNS` (a verdict only for a claim of the analysis plan; an exploratory row says so);
    ``needs`` as for :class:`Part`."""
    write: Callable[[Sources], list[dict]]
    needs: tuple[tuple[str, str], ...] = ()

    def rows(self, sources: Sources) -> list[dict]:
        return self.write(sources) if all(sources.has(*table) for table in self.needs) else []


FINDINGS_COLUMNS = ["claim", "evidence", "control", "verdict"]
EXPLORATORY = "exploratory: not a claim of the plan, no verdict"


def figure(path: Path, report_dir: Path, caption: str) -> str:
    """A figure and its caption in Markdown, linked relative to ``report_dir``; "" where there is no such file."""
    return f"![{caption}]({path.relative_to(report_dir).as_posix()})\n\n*{caption}*" if path.is_file() else ""


def bullets(sentences: list[str]) -> list[str]:
    return [f"- {s}" for s in sentences]

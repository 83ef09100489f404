"""CITATION.cff is valid Citation File Format 1.2.0 and complete: a release date, and a reference for every work the
README's "How to cite" asks readers to cite.

The schema is the CFF 1.2.0 JSON schema as cffconvert 2.0.0 bundles it (its ``$id``:
https://citation-file-format.github.io/1.2.0/schema.json), committed beside this test: cffconvert itself pins
jsonschema < 4, which JupyterLab's server cannot share an environment with.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = Path(__file__).with_name("cff-1.2.0.schema.json")


def _as_json(value):
    """YAML dates as strings: the schema validates JSON, which has no dates (its own note to implementers)."""
    if isinstance(value, dict):
        return {key: _as_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_as_json(item) for item in value]
    return value.isoformat() if isinstance(value, dt.date) else value


def citation() -> dict:
    return _as_json(yaml.safe_load((ROOT / "CITATION.cff").read_text()))


def test_citation_is_valid_cff_1_2_0():
    schema = json.loads(SCHEMA.read_text())
    assert schema["$id"] == "https://citation-file-format.github.io/1.2.0/schema.json"
    jsonschema.validate(citation(), schema)


def test_the_schema_catches_a_broken_file():
    """The validation above can fail: a misspelt key and a date that is not one are both refused."""
    schema = json.loads(SCHEMA.read_text())
    for broken in ({**citation(), "titel": "x"}, {**citation(), "date-released": "27 November 2026"}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, schema)


def test_citation_has_a_release_date():
    released = dt.date.fromisoformat(citation()["date-released"])
    assert dt.date(2025, 1, 1) <= released <= dt.date.today()


def test_every_work_the_readme_asks_to_cite_is_a_reference():
    section = (ROOT / "README.md").read_text().split("## How to cite", 1)[1].split("\n## ", 1)[0]
    # "Dosovitskiy et al. 2021", "Nguyen, Raghu & Kornblith 2021", "Abnar & Zuidema 2020": first author and year
    cited = set(re.findall(r"([A-Z][\w-]+)(?: et al\.|(?:, [A-Z][\w-]+)* & [A-Z][\w-]+)? ((?:19|20)\d\d)", section))
    assert len(cited) >= 9, cited  # the README names nine works
    referenced = {(ref["authors"][0]["family-names"], str(ref["year"])) for ref in citation()["references"]}
    assert cited == referenced
    assert all(ref["title"] and (ref.get("conference") or ref.get("journal")) for ref in citation()["references"])

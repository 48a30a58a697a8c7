"""The numbers and lists ``docs/security.md`` states about fit files, tree depths and
redaction are the code's (issue 31)."""

from __future__ import annotations

import re
from pathlib import Path

DOC = (Path(__file__).resolve().parents[1] / "docs" / "security.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    start = DOC.index(f"## {title}")
    end = DOC.find("\n## ", start + 1)
    return DOC[start:end if end > 0 else None]


def test_fit_file_section_matches_the_reader() -> None:
    from tomstats.glmm.fit_file import (
        FAMILIES,
        JSON_FORMAT_VERSION,
        MAX_JSON_BYTES,
        ML_FORMATS,
        NULLABLE,
    )
    from tomstats.glmm.fitting import FORMAT_VERSION

    text = " ".join(_section("Fit files: one reader, checked whole").split())
    mib = int(re.search(r"at most (\d+) MiB of UTF-8", text).group(1))
    assert mib * 2**20 == MAX_JSON_BYTES
    assert f'`"format_version"` {JSON_FORMAT_VERSION}' in text
    assert all(f'`"{f}"`' in text for f in ML_FORMATS)
    assert f'`tomstats_glmm_format = "{FORMAT_VERSION}"`' in text
    assert f"`family` `{FAMILIES[0]}` or `{FAMILIES[1]}`" in text
    listed = re.search(r"allowed only in (.*?) and `(\w+)`;", text)
    names = set(re.findall(r"`(\w+)`", listed.group(1))) | {listed.group(2)}
    assert names == set(NULLABLE)


def test_tree_depth_bound_matches_the_code() -> None:
    from tomstats.glmm.fitting import MAX_TREE_DEPTH

    text = " ".join(DOC.split())
    lo, hi = map(int, re.search(r"`fit --max-tree-depth` runs from (\d+) to (\d+)",
                                text).groups())
    assert (lo, hi) == (1, MAX_TREE_DEPTH)
    glmm = " ".join((Path(__file__).resolve().parents[1] / "docs" / "glmm.md").read_text(
        encoding="utf-8").split())
    assert f"`--max-tree-depth N`: NUTS maximum tree depth, 1 to {MAX_TREE_DEPTH}" in glmm


def test_redaction_table_names_every_derived_form() -> None:
    import base64

    from tomstats.evaluate.redaction import MIN_SECRET_CHARS, derived_forms

    key = "sk-docs-0123456789abcdef"
    forms = derived_forms(key)
    assert key[::-1] in forms and key.encode().hex() in forms
    b64 = base64.b64encode(key.encode()).decode().rstrip("=")
    assert any(f in b64 for f in forms if len(f) > 20)
    assert any(f in base64.urlsafe_b64encode(key.encode()).decode() for f in forms
               if len(f) > 20)
    text = " ".join(_section("Secrets: what is redacted, and how").split())
    for row in ("| reversed |", "| hexadecimal |", "| base64, standard or URL-safe"):
        assert row in text
    assert f"any piece of it of {MIN_SECRET_CHARS} or more characters" in text

"""Every sample output parses (non-streamed) to its expected content, reasoning and calls."""

from __future__ import annotations

import pytest

from tests.unit.parsers.cases import ALL_CASES, case_id
from tests.unit.parsers.cases_after_calls import AFTER_CALLS
from tests.unit.parsers.support import Case, check_expected


@pytest.mark.parametrize("case", ALL_CASES, ids=case_id)
def test_expected(case: Case) -> None:
    check_expected(case)


def test_every_after_calls_case_names_its_reference() -> None:
    """The text-after-calls and unclosed-block cases each name the public parser they follow."""
    families = {case.parser for case in AFTER_CALLS}
    assert {"hermes", "glm45", "kimi_k2", "deepseek_v3", "qwen3_coder", "mistral"} <= families
    for case in AFTER_CALLS:
        assert "vllm/" in case.reference or "sglang/" in case.reference, case.id

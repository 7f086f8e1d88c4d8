"""Every sample output parses (non-streamed) to its expected content, reasoning and calls."""

from __future__ import annotations

import pytest

from tests.unit.parsers.cases import ALL_CASES, case_id
from tests.unit.parsers.support import Case, check_expected


@pytest.mark.parametrize("case", ALL_CASES, ids=case_id)
def test_expected(case: Case) -> None:
    check_expected(case)

"""The ``make`` fixture: a Guard on the twin the ``impl`` fixture (tests/conftest.py) selects."""
from __future__ import annotations

import pytest

from loopcore import Guard


@pytest.fixture
def make(impl):
    def make(policy, **kw) -> Guard:
        return Guard(policy, implementation=impl.name, **kw)

    return make

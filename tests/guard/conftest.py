from __future__ import annotations

import pytest

from .helpers import Zygote


@pytest.fixture(scope="session")
def zygote():
    """One interpreter with torch imported, forking the example per run (see zygote.py)."""
    z = Zygote()
    yield z
    z.close()

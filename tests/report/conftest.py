"""Fixtures the report tests share."""

import pytest

from gpuwise.catalog import load_catalog


@pytest.fixture(scope="module")
def catalog():
    """The shipped catalog, without the user's own catalog file."""
    return load_catalog(user_file=False)

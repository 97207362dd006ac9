"""Fixtures for the report tests; the synthetic study lives in report_fakes.py."""

import pytest
from report_fakes import FakeResults, make_results, values


@pytest.fixture
def results() -> FakeResults:
    return make_results()


@pytest.fixture
def make():
    return make_results


@pytest.fixture
def vals():
    return values

"""Fixtures of the training-calculator tests."""

import pytest
from training_models import gpt


@pytest.fixture(scope="session")
def gpt3():
    return gpt(12288, 96, 96, name="gpt3-175b")

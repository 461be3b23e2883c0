"""Shared fixtures: a fresh random generator per test (its seed is printed, and shown when the
test fails; PARSCAN_TEST_SEED=<seed> replays it), and tolerances per dtype."""

import os
import secrets
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))  # reference.py


@pytest.fixture
def rng():
    seed = int(os.environ.get("PARSCAN_TEST_SEED", secrets.randbits(32)))
    print(f"PARSCAN_TEST_SEED={seed}")
    return np.random.default_rng(seed)

"""Shared fixtures: tiny configs (vocab 99, hidden 32, 2 layers) so model tests run in seconds."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, settings

from encoderlab.nn.config import EncoderConfig

# Property tests: a few examples each in `make test` (its time budget), many more in
# benchmarks/property_sweep.sh, which sets HYPOTHESIS_PROFILE=sweep. No deadline: 2 shared cores.
settings.register_profile("ci", max_examples=12, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
settings.register_profile("sweep", max_examples=500, deadline=None,
                          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

# The precision probe's cache (encoderlab/precision.py) in a folder of this test session, inherited
# by the subprocesses tests start: tests neither read nor write the user's ~/.cache.
# It starts empty, so no test passes because of a probe record this machine happens to hold.
os.environ["ENCODERLAB_CACHE_DIR"] = tempfile.mkdtemp(prefix="encoderlab-test-cache-")
atexit.register(shutil.rmtree, os.environ["ENCODERLAB_CACHE_DIR"], ignore_errors=True)


# Under pytest-xdist (`make test` runs a worker per core) each worker runs torch on one thread, and
# the processes its tests start inherit OMP_NUM_THREADS=1 unless they set their own: two workers of
# two OpenMP threads each on two cores spin-wait on each other (a tiny model's step beside another
# busy process measured 10-100x slower). A test that needs more threads sets them itself.
if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(1)
    os.environ.setdefault("OMP_NUM_THREADS", "1")


def tiny_encoder(**kw) -> EncoderConfig:
    base = dict(vocab_size=99, hidden_size=32, num_layers=2, num_heads=4, intermediate_size=37,
                max_position_embeddings=64, hidden_dropout=0.0, attention_dropout=0.0)
    base.update(kw)
    return EncoderConfig(**base)


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data not present at {SHARED_DATA} (a fresh clone has no ../shared)")
    return SHARED_DATA


@pytest.fixture
def one_thread():
    """One torch thread for the test (tests that compare runs, or start subprocesses that need the
    other core), the previous count restored after it."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture
def stand_in_store(monkeypatch):
    """Study plans without a prepared token store: a plan reads only the store's vocabulary size, so
    TokenStore stands in with a settable one (``stand_in_store.vocab_size = ...``), patched where the
    data package defines it and where study/plan.py imports it. ``stand_in_store.data`` is the
    study's data record that names it."""

    class Store:
        vocab_size = 8192
        data = {"store": "store", "tokenizer": "tok", "demo_task": None, "tokens": 1}

        def __init__(self, path):
            pass

    monkeypatch.setattr("encoderlab.data.store.TokenStore", Store)
    monkeypatch.setattr("encoderlab.study.plan.TokenStore", Store)
    return Store

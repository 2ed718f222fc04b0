"""The plain records that replaced dataclasses on the shepherd's path (orbit/record.py) keep a
dataclass's guarantees: compared by value, frozen ones hashable and never changed."""

from __future__ import annotations

from pathlib import Path

import pytest

from orbit.sched.resources import Amount
from orbit.store.model import Peaks, Run
from orbit.store.secrets import Secrets


def test_frozen_records_are_values() -> None:
    assert Amount(2, 1) == Amount(2.0, 1.0) and Amount(2, 1) != Amount(2, 2)
    assert len({Amount(2, 1), Amount(2.0, 1.0), Peaks(), Peaks(mem_bytes=0)}) == 2
    assert repr(Amount(2, 1)) == "Amount(cpus=2, mem_gb=1)"
    with pytest.raises(AttributeError):
        Amount(2, 1).cpus = 3


def test_records_compare_by_value_and_are_not_hashable() -> None:
    assert Secrets() == Secrets({}, [], {}) and Secrets() != Secrets(redact=["x"])
    assert Secrets().env is not Secrets().env  # each gets its own empty dict
    run = Run("1", Path("r"), {"name": "a"}, {"state": "queued"}, stamp=[1, 2, 3])
    assert run == Run("1", Path("r"), {"name": "a"}, {"state": "queued"})  # whatever its stamp
    assert run != Run("1", Path("r"), {"name": "b"}, {"state": "queued"})
    with pytest.raises(TypeError):
        hash(run)


def test_a_secrets_repr_names_what_it_holds_and_shows_no_value() -> None:
    shown = repr(Secrets({"API_KEY": "sk-very-secret"}, ["tok-123456"], {"auth.json": b"pw"}))
    assert "API_KEY" in shown and "auth.json" in shown
    assert "sk-very-secret" not in shown and "tok-123456" not in shown and "pw'" not in shown

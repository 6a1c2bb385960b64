"""A study's finished stages, each stored with a fingerprint of everything it depends on, so a rerun
skips what is done and redoes what changed (stages.json, rewritten by rename after every stage:
a study killed at any moment keeps every stage it had finished)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path


class Stages:
    """Finished stages, keyed by name, each with the fingerprint it was computed under."""

    def __init__(self, path: Path):
        self.path = path
        self.data = json.loads(path.read_text()) if path.exists() else {}

    def get(self, key: str, fingerprint: str):
        rec = self.data.get(key)
        return rec["result"] if rec and rec["fingerprint"] == fingerprint else None

    def put(self, key: str, fingerprint: str, result) -> None:
        self.data[key] = {"fingerprint": fingerprint, "result": result}
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1))
        os.replace(tmp, self.path)


def fingerprint(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]

"""gpipe's defaults (gpipe/gpipe.yaml) merged into ``dask.config`` under ``gpipe.``."""

from __future__ import annotations

import os

import dask.config
import yaml

_DEFAULTS_FILE = os.path.join(os.path.dirname(__file__), "gpipe.yaml")

with open(_DEFAULTS_FILE) as _f:
    dask.config.update_defaults(yaml.safe_load(_f))


def get(key: str):
    """``dask.config.get('gpipe.' + key)``."""
    return dask.config.get(f"gpipe.{key}")

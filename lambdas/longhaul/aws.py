"""boto3 clients, created once per process (boto3 clients are thread-safe; sessions are not shared)."""

from __future__ import annotations

import threading
from functools import cache
from typing import Any

import boto3
from botocore.config import Config

_lock = threading.Lock()
_CONFIG = Config(retries={"mode": "standard", "max_attempts": 4}, connect_timeout=5, read_timeout=30)


@cache
def client(service: str, endpoint_url: str | None = None) -> Any:
    with _lock:
        return boto3.session.Session().client(service, endpoint_url=endpoint_url, config=_CONFIG)


@cache
def dynamodb_table(name: str) -> Any:
    with _lock:
        return boto3.session.Session().resource("dynamodb", config=_CONFIG).Table(name)

"""Reading many objects at once (`ArtifactStore.get_json_many`): a step that reads one object per document does it
concurrently, and what it reads is still in order, metered and failing as one read would."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from botocore.exceptions import ClientError

from longhaul.core import metering
from longhaul.storage.artifacts import ArtifactStore


class ThreadRecordingStore(ArtifactStore):
    """The S3 adapter, recording which threads read, and how many reads were in flight at once."""

    def __init__(self, s3: Any, bucket: str) -> None:
        super().__init__(s3, bucket)
        self.threads: set[int] = set()
        self._lock = threading.Lock()
        self._in_flight = 0
        self.most_in_flight = 0
        self.overlap: threading.Barrier | None = None  # set: the first two reads wait for each other

    def get_bytes(self, key: str) -> bytes:
        with self._lock:
            self.threads.add(threading.get_ident())
            self._in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self._in_flight)
        try:
            if self.overlap is not None and key.endswith(("000.json", "001.json")):
                self.overlap.wait()  # they can pass only if both are in flight at once
            return super().get_bytes(key)
        finally:
            with self._lock:
                self._in_flight -= 1


@pytest.fixture
def store(s3: Any, bucket: str) -> ThreadRecordingStore:
    return ThreadRecordingStore(metering.instrument(s3), bucket)


def _keys(store: ArtifactStore, count: int) -> list[str]:
    return [store.put_json(f"work/job_1/parse_documents/{i:03d}.json", {"index": i}) for i in range(count)]


def test_many_objects_are_read_concurrently_and_answered_in_order(store: ThreadRecordingStore) -> None:
    keys = _keys(store, 40)
    store.overlap = threading.Barrier(2, timeout=5)
    assert store.get_json_many(keys, at_once=8) == [{"index": i} for i in range(40)]
    assert store.most_in_flight >= 2
    assert store.most_in_flight <= 8
    assert threading.get_ident() not in store.threads  # the caller only waits


def test_reads_in_other_threads_count_into_the_callers_meter(store: ThreadRecordingStore) -> None:
    keys = _keys(store, 12)
    with metering.metered() as meter:
        store.get_json_many(keys, at_once=4)
    counted = meter.requests()
    assert counted.s3_requests == 12
    assert counted.s3_class_b == 12


def test_a_missing_object_fails_the_read(store: ThreadRecordingStore) -> None:
    keys = _keys(store, 5)
    with pytest.raises(ClientError) as raised:
        store.get_json_many([*keys, "work/job_1/parse_documents/999.json"], at_once=3)
    assert raised.value.response["Error"]["Code"] == "NoSuchKey"


def test_one_key_or_none_is_read_on_the_callers_thread(store: ThreadRecordingStore) -> None:
    keys = _keys(store, 1)
    assert store.get_json_many([]) == []
    assert store.get_json_many(keys) == [{"index": 0}]
    assert store.threads == {threading.get_ident()}

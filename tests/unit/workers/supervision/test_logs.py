"""A worker's log: copied from its pipe, rotated by size, its last lines kept."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from workers.supervision.logs import LogCapture


def test_output_is_copied_and_the_tail_keeps_the_last_lines(tmp_path: Path) -> None:
    log = LogCapture(tmp_path / "w" / "worker.log", tail_lines=2)
    log.note("starting")
    log.attach(io.BytesIO(b"one\ntwo\nsampling  10%\rsampling 100%\n"))
    log.join()
    assert log.tail() == ["two", "sampling 100%"]
    text = (tmp_path / "w" / "worker.log").read_text()
    assert text.startswith("[comfy-gateway] starting\none\n")
    log.close()


def test_the_file_rotates_by_size_and_keeps_its_backups(tmp_path: Path) -> None:
    path = tmp_path / "worker.log"
    log = LogCapture(path, max_bytes=10, backups=2)
    log.attach(io.BytesIO(b"".join(f"line {i:04d}\n".encode() for i in range(5))))
    log.join()
    log.close()
    # Each 10-byte line fills the file: it rotates after every line.
    assert path.with_name("worker.log.1").read_text() == "line 0004\n"
    assert path.with_name("worker.log.2").read_text() == "line 0003\n"
    assert not path.with_name("worker.log.3").exists()
    assert log.tail()[-1] == "line 0004"


def test_impossible_sizes_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_bytes"):
        LogCapture(tmp_path / "x.log", max_bytes=0)

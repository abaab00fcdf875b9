"""Read an offline W&B run file (``run-<id>.wandb``) back record by record, with wandb's own protobuf
``Record`` messages. wandb >= 0.19 writes the file from its Go core and ships no Python reader, so the
framing (LevelDB's log format, as wandb's ``datastore`` documented it) is read here: a 7-byte file
header ``:W&B`` + magic 0xBEE1 + version 0, then 32 KiB blocks of chunks, each
``crc32 (u32) | length (u16) | type (u8: 1 full, 2 first, 3 middle, 4 last) | data``."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from wandb.proto import wandb_internal_pb2

BLOCK = 32768
HEADER = 7


def records(path: str | Path) -> list[wandb_internal_pb2.Record]:
    data = Path(path).read_bytes()
    assert data[:4] == b":W&B" and struct.unpack("<HB", data[4:7]) == (0xBEE1, 0), (
        f"{path}: not a .wandb file"
    )
    out, buf, pos = [], b"", HEADER
    while pos + HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER:  # the rest of a block too short for a chunk header is padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + HEADER])
        chunk = data[pos + HEADER : pos + HEADER + length]
        pos += HEADER + length
        if kind == 1:
            out.append(chunk)
        elif kind == 2:
            buf = chunk
        elif kind == 3:
            buf += chunk
        elif kind == 4:
            out.append(buf + chunk)
            buf = b""
    parsed = []
    for raw in out:
        rec = wandb_internal_pb2.Record()
        rec.ParseFromString(raw)
        parsed.append(rec)
    return parsed


def history(path: str | Path) -> list[dict]:
    """The history rows: {"_step": step, key: value, ...} in file order."""
    rows = []
    for rec in records(path):
        if rec.WhichOneof("record_type") == "history":
            row = {"_step": rec.history.step.num}
            for item in rec.history.item:
                key = item.key or "/".join(item.nested_key)
                row[key] = json.loads(item.value_json)
            rows.append(row)
    return rows


def summary(path: str | Path) -> dict:
    """The run summary: the last value of every key the file's summary records set."""
    out: dict = {}
    for rec in records(path):
        if rec.WhichOneof("record_type") == "summary":
            for item in rec.summary.update:
                out[item.key or "/".join(item.nested_key)] = json.loads(item.value_json)
    return out


def run_record(path: str | Path):
    """The run record (run_id, run_group, job_type, tags, config) of the file."""
    return next(r.run for r in records(path) if r.WhichOneof("record_type") == "run")


def exit_code(path: str | Path) -> int | None:
    """The exit code the run was finished with (None: not finished)."""
    codes = [r.exit.exit_code for r in records(path) if r.WhichOneof("record_type") == "exit"]
    return codes[-1] if codes else None

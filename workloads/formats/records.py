"""The record encodings of the packed formats: caffe `Datum` messages (NVCaffe's LMDB values),
encoded with a small protobuf varint codec, and dmlc RecordIO framing with MXNet's IRHeader.
Standard library only.
"""

from __future__ import annotations

import os
import struct
from typing import Any


# ---------------------------------------------------------------- protobuf (caffe Datum)
def _varint(value: int) -> bytes:
    if value < 0:  # int32/int64 negatives are ten-byte two's complement on the wire
        value += 1 << 64
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _signed32(value: int) -> int:
    value &= (1 << 64) - 1
    if value >= 1 << 63:
        value -= 1 << 64
    return value


# Datum field numbers from caffe.proto.
_DATUM_CHANNELS, _DATUM_HEIGHT, _DATUM_WIDTH, _DATUM_DATA, _DATUM_LABEL, _DATUM_FLOAT, _DATUM_ENCODED = 1, 2, 3, 4, 5, 6, 7


def encode_datum(data: bytes, label: int, channels: int = 3, height: int = 0, width: int = 0, encoded: bool = True) -> bytes:
    """A serialized caffe Datum, fields in number order as protobuf writes them."""
    out = bytearray()
    for number, value in ((_DATUM_CHANNELS, channels), (_DATUM_HEIGHT, height), (_DATUM_WIDTH, width)):
        out += _varint(number << 3) + _varint(int(value))
    out += _varint(_DATUM_DATA << 3 | 2) + _varint(len(data)) + data
    out += _varint(_DATUM_LABEL << 3) + _varint(int(label))
    out += _varint(_DATUM_ENCODED << 3) + _varint(1 if encoded else 0)
    return bytes(out)


def decode_datum(buf: bytes) -> dict:
    """Parse a serialized caffe Datum; unknown fields are skipped as protobuf requires."""
    datum: dict[str, Any] = {"channels": 0, "height": 0, "width": 0, "data": b"", "label": 0, "float_data": [], "encoded": False}
    pos = 0
    while pos < len(buf):
        key, pos = _read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _read_varint(buf, pos)
            if number == _DATUM_CHANNELS:
                datum["channels"] = _signed32(value)
            elif number == _DATUM_HEIGHT:
                datum["height"] = _signed32(value)
            elif number == _DATUM_WIDTH:
                datum["width"] = _signed32(value)
            elif number == _DATUM_LABEL:
                datum["label"] = _signed32(value)
            elif number == _DATUM_ENCODED:
                datum["encoded"] = bool(value)
        elif wire == 2:
            length, pos = _read_varint(buf, pos)
            if pos + length > len(buf):
                raise ValueError("truncated length-delimited field")
            chunk = buf[pos : pos + length]
            pos += length
            if number == _DATUM_DATA:
                datum["data"] = bytes(chunk)
            elif number == _DATUM_FLOAT:  # packed repeated float
                datum["float_data"] += list(struct.unpack(f"<{length // 4}f", chunk))
        elif wire == 5:
            if number == _DATUM_FLOAT:
                datum["float_data"].append(struct.unpack_from("<f", buf, pos)[0])
            pos += 4
        elif wire == 1:
            pos += 8
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
    return datum


# ---------------------------------------------------------------- RecordIO (dmlc / MXNet)
RECORDIO_MAGIC = 0xCED7230A
_MAGIC_BYTES = struct.pack("<I", RECORDIO_MAGIC)
_IRHEADER = struct.Struct("<IfQQ")  # flag, label, id, id2


def pack_irheader(data: bytes, label: float, record_id: int, record_id2: int = 0) -> bytes:
    """mxnet.recordio.pack: IRHeader then the payload (flag 0: one scalar label)."""
    return _IRHEADER.pack(0, float(label), int(record_id), int(record_id2)) + data


def unpack_irheader(payload: bytes) -> tuple[dict, bytes]:
    flag, label, rid, rid2 = _IRHEADER.unpack_from(payload, 0)
    body = payload[_IRHEADER.size :]
    if flag > 0:  # a vector label of `flag` floats precedes the data
        labels = list(struct.unpack_from(f"<{flag}f", body, 0))
        return {"flag": flag, "label": labels, "id": rid, "id2": rid2}, body[4 * flag :]
    return {"flag": flag, "label": label, "id": rid, "id2": rid2}, body


def recordio_frame(payload: bytes) -> bytes:
    """One record as dmlc::RecordIOWriter frames it. The magic word must never appear 4-byte aligned
    inside a record, so the payload is split there into parts (continuation flags 1, 2, 3) and the
    reader puts the magic back between them."""
    out = bytearray()
    length = len(payload)
    aligned_end = length - length % 4
    start = 0
    hit = payload.find(_MAGIC_BYTES)
    while 0 <= hit and hit + 4 <= aligned_end:
        if hit % 4 == 0:
            flag = 1 if start == 0 else 2
            out += _MAGIC_BYTES + struct.pack("<I", (flag << 29) | (hit - start)) + payload[start:hit]
            start = hit + 4
        hit = payload.find(_MAGIC_BYTES, hit + 1)
    flag = 3 if start else 0
    out += _MAGIC_BYTES + struct.pack("<I", (flag << 29) | (length - start)) + payload[start:]
    out += b"\0" * ((-length) % 4)
    return bytes(out)


def read_recordio_at(fd: int, offset: int) -> tuple[bytes, int]:
    """(payload, offset of the next record) of the record starting at `offset` of an open .rec."""
    parts: list[bytes] = []
    pos = offset
    while True:
        head = os.pread(fd, 8, pos)
        if len(head) < 8:
            raise ValueError(f"truncated RecordIO header at offset {pos}")
        magic, lrec = struct.unpack("<II", head)
        if magic != RECORDIO_MAGIC:
            raise ValueError(f"bad RecordIO magic {magic:#x} at offset {pos}")
        flag, length = lrec >> 29, lrec & ((1 << 29) - 1)
        data = os.pread(fd, length, pos + 8)
        if len(data) < length:
            raise ValueError(f"truncated RecordIO record at offset {pos}")
        pos += 8 + length + ((-length) % 4)
        if flag == 0:
            return data, pos
        parts.append(data)
        if flag == 3:
            return _MAGIC_BYTES.join(parts), pos

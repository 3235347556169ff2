"""Packed image formats, each record a (JPEG bytes, int label) pair, written the way the frameworks'
own tools write them, and read back with random access.

- `files`: an ImageNet-style folder, `<split>/<class>/<image>`; labels are the sorted class folders.
- `lmdb`: what NVCaffe's `convert_imageset --encoded` writes: keys `%08d_<relative path>`, values
  serialized caffe `Datum` messages (channels, height, width, data = the encoded JPEG, label,
  encoded = true), encoded here with a small protobuf varint codec.
- `rec`: what MXNet's `im2rec` writes: a RecordIO `.rec` (dmlc magic 0xced7230a, a length and
  continuation-flag word, 4-byte padding) whose payload is an IRHeader (`IfQQ`: flag, label, id,
  id2) and the JPEG, an `.idx` of `id<TAB>offset` lines and the `.lst` it came from.
- `tar`: WebDataset shards `<split>-000000.tar`, ... with `<key>.jpg` and `<key>.cls` per sample.

Packed datasets live under `<root>/<fmt>/...` (`root` is `<data_dir>/packed` for a generated
dataset): `lmdb/<split>/`, `rec/<split>.{rec,idx,lst}`, `tar/<split>/<split>-NNNNNN.tar`.

The encodings are in `records`, the writers in `writers`, the readers in `readers`; this package
re-exports the names its callers use.
"""

from __future__ import annotations

from workloads.formats.readers import (
    FORMAT_MODULES,
    FORMATS,
    IMAGE_EXTENSIONS,
    ImageFolder,
    LmdbReader,
    Record,
    RecordIOReader,
    TarShardReader,
    close_lmdb_envs,
    dataset_bytes,
    dataset_files,
    open_image_dataset,
    open_packed,
    packed_paths,
    read_ahead,
    read_file,
)
from workloads.formats.records import (
    RECORDIO_MAGIC,
    decode_datum,
    encode_datum,
    pack_irheader,
    read_recordio_at,
    recordio_frame,
    unpack_irheader,
)
from workloads.formats.writers import LmdbWriter, RecordIOWriter, TarShardWriter, open_writer, pack_records

__all__ = [
    "FORMAT_MODULES",
    "FORMATS",
    "IMAGE_EXTENSIONS",
    "RECORDIO_MAGIC",
    "ImageFolder",
    "LmdbReader",
    "LmdbWriter",
    "Record",
    "RecordIOReader",
    "RecordIOWriter",
    "TarShardReader",
    "TarShardWriter",
    "close_lmdb_envs",
    "dataset_bytes",
    "dataset_files",
    "decode_datum",
    "encode_datum",
    "open_image_dataset",
    "open_packed",
    "open_writer",
    "pack_irheader",
    "pack_records",
    "packed_paths",
    "read_ahead",
    "read_file",
    "read_recordio_at",
    "recordio_frame",
    "unpack_irheader",
]

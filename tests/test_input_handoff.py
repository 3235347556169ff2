"""The uint8 hand-off: loader workers pass decoded bytes, the training process normalizes on its
device. The model must see the same input as with torchvision's reference recipe (ToTensor +
Normalize in the worker), in the memory layout it asked for; and the calibration must measure
what a worker does per image."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch.utils.data import default_collate  # noqa: E402

from workloads import image_transforms  # noqa: E402
from workloads.synth import synth_jpeg  # noqa: E402


def _batch(normalize: str, n: int = 6):
    transform = image_transforms.eval_transform(64, 73, normalize)  # deterministic: resize + centre crop
    return default_collate([transform(image_transforms.decode_rgb(synth_jpeg(11, i))) for i in range(n)])


@pytest.mark.parametrize("channels_last", [True, False])
def test_device_normalization_matches_the_reference_recipe(channels_last):
    handed = _batch("device")
    reference = _batch("worker")
    assert handed.dtype == torch.uint8 and handed.shape == (6, 64, 64, 3)  # HWC bytes, a quarter of float's
    assert reference.dtype == torch.float32 and reference.shape == (6, 3, 64, 64)
    x = image_transforms.DeviceInput("cpu", "device", channels_last)(handed)
    ref = image_transforms.DeviceInput("cpu", "worker", channels_last)(reference)
    assert x.shape == ref.shape == (6, 3, 64, 64) and x.dtype == torch.float32
    assert torch.allclose(x, ref, atol=1e-5), float((x - ref).abs().max())
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    assert x.is_contiguous(memory_format=fmt) and ref.is_contiguous(memory_format=fmt)


def test_unknown_normalize_setting_is_refused():
    with pytest.raises(ValueError, match="normalize"):
        image_transforms.train_transform(64, "gpu")
    with pytest.raises(ValueError, match="normalize"):
        image_transforms.DeviceInput("cpu", "nowhere", True)


def test_training_augmentation_hands_over_uint8_crops_of_the_asked_size():
    out = image_transforms.train_transform(48)(image_transforms.decode_rgb(synth_jpeg(3, 0)))
    assert out.dtype == torch.uint8 and out.shape == (48, 48, 3) and out.is_contiguous()
    assert int(out.max()) > int(out.min())  # image content, not a blank buffer


def test_calibration_method_names_the_per_image_work():
    from workloads.cpu_calibrate import CpuCalibrate, calibration_method

    default = calibration_method(CpuCalibrate.defaults["gpu"])
    assert "uint8" in default and "224" in default
    assert calibration_method({**CpuCalibrate.defaults["gpu"], "normalize": "worker"}) != default

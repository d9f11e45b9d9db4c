"""Where learners compute: the CPU, or a GPU chosen once per process by `train.device`."""

import torch

from asrscale.errors import ConfigError, UserError

DEVICE_CHOICES = ("auto", "cpu", "cuda")


def resolve_device(choice: str, index: int = 0) -> torch.device:
    """The process's device for `train.device` (auto: a GPU where CUDA has one). `index` picks
    among the GPUs this process sees (modulo their number): a rank's index on its machine, so that
    ranks spread over the machine's GPUs; a site that binds one GPU to each task gets that one."""
    if choice not in DEVICE_CHOICES:
        raise ConfigError(f"train.device must be one of {DEVICE_CHOICES}, not {choice!r}")
    if choice == "cpu" or (choice == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise UserError("train.device is cuda, but torch finds no CUDA device here")
    device = torch.device("cuda", index % torch.cuda.device_count())
    torch.cuda.set_device(device)  # NCCL and cuDNN work on the current device
    return device


def uses_gpu(choice: str) -> bool:
    """Whether `train.device` puts learners on a GPU on this machine (asked without touching
    one)."""
    return choice != "cpu" and torch.cuda.is_available()


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work, so that a host clock times it (a GPU runs
    asynchronously)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def gpu_identity(device: torch.device) -> str | None:
    """The physical GPU behind `device` (its UUID), or None on the CPU: ranks that see one GPU
    under different indices are still found to share it."""
    if device.type != "cuda":
        return None
    properties = torch.cuda.get_device_properties(device)
    return str(getattr(properties, "uuid", None) or f"{properties.name}#{device.index}")


def describe(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"

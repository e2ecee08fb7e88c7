"""The oldest NVIDIA Linux driver a CUDA runtime runs on, without torch (a job's start-up line, the docs).

From CUDA 11 on, a runtime of one CUDA major runs on any driver of that major's family and newer ("minor version
compatibility"): NVIDIA's CUDA Compatibility guide, *Minor Version Compatibility*
(https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html), table "CUDA Toolkit 11.x, 12.x
and 13.x Minimum Required Driver Versions": CUDA 13.x >= 580, CUDA 12.x >= 525 (and below 580 only through this
compatibility). The exact Linux x86-64 versions are the CUDA Toolkit release notes' ("CUDA Toolkit and Minimum
Required Driver Version for CUDA Minor Version Compatibility"): 12.x >= 525.60.13 (the CUDA 12.0 GA driver), 13.x >=
580.65.06 (the CUDA 13.0 GA driver). Minor version compatibility does not cover PTX compiled at run time by a newer
toolkit than the driver (torch.compile, Triton): that needs the toolkit's own driver.
"""

from __future__ import annotations

import re

#: the minimum Linux x86-64 driver of each CUDA major under minor version compatibility (sources above)
MINIMUM_DRIVER = {12: "525.60.13", 13: "580.65.06"}


def _numbers(version: str) -> tuple[int, ...]:
    """``"525.60.13"`` as ``(525, 60, 13)``; raises ValueError for anything but dot-separated numbers."""
    if not re.fullmatch(r"\d+(\.\d+)*", version.strip()):
        raise ValueError(f"version '{version}': expected numbers separated by dots, e.g. 12.6 or 535.104.05")
    return tuple(int(part) for part in version.strip().split("."))


def driver_needed(cuda_version: str) -> str:
    """The minimum NVIDIA Linux driver (``"525.60.13"``) for a CUDA runtime version such as ``torch.version.cuda``
    (``"12.6"``, ``"13.0"``; a bare major works too). Raises ValueError for a major other than 12 or 13."""
    major = _numbers(str(cuda_version))[0]
    if major not in MINIMUM_DRIVER:
        raise ValueError(f"CUDA {cuda_version}: the minimum driver is known here for CUDA 12.x and 13.x only")
    return MINIMUM_DRIVER[major]


def driver_supports(driver: str, cuda_version: str) -> bool:
    """Whether an NVIDIA driver version (``nvidia-smi``'s, e.g. ``"535.104.05"``) runs a CUDA runtime version
    (:func:`driver_needed`): compared number by number."""
    return _numbers(driver) >= _numbers(driver_needed(cuda_version))

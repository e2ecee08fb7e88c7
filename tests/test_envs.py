"""The GPU environment's lock: one CUDA stack, the CPU lock's versions, FAISS as on the CPU, and made by its command."""

from __future__ import annotations

from curricula.plumbing.locks import (CPU_LOCK, GPU_LOCK, cuda_majors, cuda_pins_of, gpu_lock, normalise, pins,
                                      runtime_lines)


def test_gpu_lock_is_the_cpu_lock_plus_one_cuda_stack():
    cpu, gpu = pins(CPU_LOCK.read_text()), pins(GPU_LOCK.read_text())
    runtime = {normalise(line.split("==")[0]) for line in runtime_lines(CPU_LOCK.read_text())}
    assert {name: gpu.get(name, ("absent",))[0] for name in runtime} == {name: cpu[name][0] for name in runtime}
    assert gpu["faiss-cpu"] == cpu["faiss-cpu"] and not [n for n in gpu if n.startswith("faiss-gpu")]
    assert gpu["torch"][0] == cpu["torch"][0]
    assert cuda_majors(GPU_LOCK.read_text()) == {"13"}  # torch's wheel: cuda-toolkit 13, nothing built for CUDA 12
    assert "cuda-toolkit" in gpu and "nvidia-cudnn-cu13" in gpu  # the stack is pinned, not left to the resolver
    assert not (set(gpu) - runtime - {n for n in gpu if n.startswith(("nvidia-", "cuda-")) or n == "triton"})


def test_gpu_lock_follows_the_cpu_lock():
    """Regenerating from the committed CUDA pins gives the committed file: a CPU lock change was carried over."""
    committed = GPU_LOCK.read_text()
    cpu = CPU_LOCK.read_text()
    cuda = {line.split("==")[0]: version for name, (version, line) in pins(committed).items()
            if name not in pins(cpu)}
    assert gpu_lock(cpu, cuda) == committed


def test_cuda_majors_and_the_pip_report():
    mixed = "torch==2.13.0\ncuda-toolkit==13.0.3.0\nfaiss-gpu-cu12==1.14.1.post1\nnvidia-cublas-cu12==12.6.4.1\n"
    assert cuda_majors(mixed) == {"12", "13"}
    assert cuda_majors("numpy==2.0\nnvidia-cufft==12.0.0.61\n") == set()  # cuFFT's own version, not CUDA's
    report = {"install": [{"metadata": {"name": n, "version": v}} for n, v in
                          [("torch", "2.13.0"), ("nvidia-nccl-cu13", "2.29.7"), ("triton", "3.7.1"), ("sympy", "1")]]}
    assert cuda_pins_of(report, "torch==2.13.0\nsympy==1\n") == {"nvidia-nccl-cu13": "2.29.7", "triton": "3.7.1"}

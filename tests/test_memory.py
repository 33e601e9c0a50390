"""A trial's peak memory window (measurement/memory.py): on CUDA what the allocator holds is the training's, not the
warm-up's it kept cached; the CUDA calls are faked at the lowest layer (torch.cuda), so no GPU is needed."""

import types

import torch
from tokenwatt.measurement import memory
from tokenwatt.measurement.memory import PeakMemory


def _fake_cuda(calls: list[str], cached: int) -> types.SimpleNamespace:
    """torch.cuda as the window asks it: an allocator that holds ``cached`` bytes of warm-up blocks until its cache is
    emptied, and whose reserved peak a reset sets to what it holds then."""
    held = {"reserved": 1000 + cached, "peak": 1000 + cached}

    def empty_cache() -> None:
        calls.append("empty_cache")
        held["reserved"] = 1000

    def reset(device: torch.device) -> None:
        calls.append("reset")
        held["peak"] = held["reserved"]

    return types.SimpleNamespace(
        synchronize=lambda device=None: calls.append("synchronize"),
        empty_cache=empty_cache,
        reset_peak_memory_stats=reset,
        memory_allocated=lambda device=None: 800,
        max_memory_allocated=lambda device=None: 900,
        max_memory_reserved=lambda device=None: held["peak"],
    )


def test_the_cuda_window_empties_the_allocators_cache_before_its_peak_is_reset(monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(memory.torch, "cuda", _fake_cuda(calls, cached=10**9))
    peak = PeakMemory(torch.device("cuda", 0))
    peak.start()
    assert calls.index("empty_cache") < calls.index("reset")
    got = peak.read()
    assert got["peak_memory_reserved_bytes"] == 1000  # the warm-up's cached gigabyte is not the training's
    assert got["peak_memory_bytes"] == 900 and got["memory_at_start_bytes"] == 800
    assert got["peak_memory_method"] == "cuda-allocator"


def test_a_cpu_peak_is_never_recorded_below_the_resident_set_at_its_start(tmp_path, monkeypatch):
    """The kernel's resident-set counters are approximate by some pages: a VmHWM read at the end below the VmRSS read
    at the start (seen: 11 pages, a resumed schedule-free trial whose training added nothing above its start) is the
    counters' error, and the window's peak is at least its start."""
    status, clear = tmp_path / "status", tmp_path / "clear_refs"
    clear.write_text("")
    monkeypatch.setattr(memory, "STATUS", status)
    monkeypatch.setattr(memory, "CLEAR_REFS", clear)
    peak = PeakMemory(torch.device("cpu"))
    status.write_text("VmHWM:\t 801580 kB\nVmRSS:\t 801580 kB\n")
    peak.start()
    status.write_text("VmHWM:\t 801536 kB\nVmRSS:\t 790000 kB\n")
    got = peak.read()
    assert clear.read_text() == "5" and got["peak_memory_method"] == "vmhwm-reset-at-training"
    assert got["memory_at_start_bytes"] == got["peak_memory_bytes"] == 801580 * 1024
    status.write_text("VmHWM:\t 900000 kB\nVmRSS:\t 790000 kB\n")
    assert peak.read()["peak_memory_bytes"] == 900000 * 1024

"""The CPU's code path pinned (asrscale.machine): the pin reaches the kernels, so that a process
whose environment asks for another instruction set (as another processor would choose) computes
the pinned bits, where unpinned it computes others."""

import json
import os
import subprocess
import sys

import pytest

from asrscale import machine

# a few steps of an LSTM with an output layer, clipped, by Adam: oneDNN's LSTM, MKL's products,
# ATen's vectorised softmax, norm and steps; the weights' digest and ATen's kernels chosen
TRAIN = """
import hashlib, json, sys
from asrscale import machine
machine.pin(sys.argv[1])
import torch
torch.set_num_threads(1)
torch.manual_seed(0)
lstm, output = torch.nn.LSTM(40, 64, bidirectional=True, batch_first=True), torch.nn.Linear(128, 30)
parameters = [*lstm.parameters(), *output.parameters()]
optimizer = torch.optim.Adam(parameters, lr=0.003)
for _ in range(3):
    optimizer.zero_grad()
    loss = output(lstm(torch.randn(8, 60, 40))[0]).log_softmax(-1).logsumexp(-1).mean()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(parameters, 1.0)
    optimizer.step()
digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in parameters)).hexdigest()
print(json.dumps({"digest": digest, **machine.described()}))
"""
#: what another processor's libraries would choose, short of AVX2 (as wide as this test needs;
#: MKL runs its own path on a processor not Intel's, whatever branch it is asked for but
#: COMPATIBLE, so its stand-in is the path by default)
ELSEWHERE = {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41", "MKL_CBWR": "AUTO"}


def trained(setting: str, **environment) -> dict:
    clean = {k: v for k, v in os.environ.items() if k not in machine.PINNED}
    clean.pop(machine.ARITHMETIC, None)
    done = subprocess.run(
        [sys.executable, "-c", TRAIN, setting],
        env={**clean, **environment},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.slow
@pytest.mark.skipif(not machine.has_avx2(), reason="an x86 processor with AVX2 pins its path")
def test_pinned_arithmetic_is_the_same_whatever_instruction_set_the_environment_asks_for():
    pinned = trained("avx2")
    assert pinned["aten"] == "AVX2" and pinned["MKL_CBWR"] == "COMPATIBLE"
    assert trained("avx2", **ELSEWHERE)["digest"] == pinned["digest"]
    # unpinned, each variable reaches its library's kernels: another path, other bits
    native = trained("native")
    assert native["digest"] != pinned["digest"]  # MKL's compatible path at least
    assert trained("native", MKL_CBWR="COMPATIBLE")["digest"] != native["digest"]
    aten = trained("native", ATEN_CPU_CAPABILITY="default")
    assert aten["aten"] == "DEFAULT" and aten["digest"] != native["digest"]
    assert trained("native", ONEDNN_MAX_CPU_ISA="SSE41")["digest"] != native["digest"]


def test_a_processor_without_avx2_computes_natively(tmp_path, monkeypatch):
    """AVX2 forced on a processor without it would stop the process at its first instruction."""
    for name in [*machine.PINNED, machine.ARITHMETIC]:
        monkeypatch.delenv(name, raising=False)
    old = tmp_path / "cpuinfo"
    old.write_text("processor\t: 0\nflags\t\t: fpu sse sse2 sse4_2 avx\n")
    new = tmp_path / "cpuinfo-avx2"
    new.write_text("processor\t: 0\nflags\t\t: fpu sse sse2 avx fma avx2\n")
    assert not machine.has_avx2(old) and machine.has_avx2(new)
    assert not machine.has_avx2(tmp_path / "none")  # no /proc/cpuinfo: not known
    monkeypatch.setattr(machine, "has_avx2", lambda: False)
    assert machine.pin("avx2") == "native" and "ATEN_CPU_CAPABILITY" not in os.environ
    monkeypatch.setattr(machine, "has_avx2", lambda: True)
    monkeypatch.delenv(machine.ARITHMETIC)  # by default pinned
    assert machine.pin() == "avx2" and os.environ["ONEDNN_MAX_CPU_ISA"] == "AVX2"
    assert os.environ[machine.ARITHMETIC] == "avx2"
    with pytest.raises(ValueError, match="study.cpu_arithmetic.*not 'avx512'"):
        machine.pin("avx512")


def test_a_studys_wall_time_is_scaled_to_this_machines_speed():
    """claims-at-4's 1 h 09 min at 60,700 frames/s is about 3 hours at 23,050 (the speed of the
    machine that took README's 14-20 minutes for 36 min 46 s)."""
    claims = {"minutes": 69, "frames_per_s": 60_700}
    assert machine.wall_time_here(claims, 23_050) == (
        "this machine: 23,050 frames/s on one thread (the default BLSTM at batch 32), 0.38 times "
        "the 60,700 at which the study took 1 h 9 min: about 3 h 1 min here"
    )
    assert "states no wall time" in machine.wall_time_here(None, 23_050)
    busy = {"machine_rate": 23_050.0, "busy": "at 1 threads other processes held 70%"}
    assert machine.said_of(busy, claims).endswith(
        "(timed on a busy machine, at 1 threads other processes held 70%: alone it may run faster)"
    )
    assert "predates" in machine.said_of({}, claims)

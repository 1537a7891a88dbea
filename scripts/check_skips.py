#!/usr/bin/env python3
"""Why: a skipped test proves nothing, and a test that starts skipping for a
new reason (a missing file, a setup step that stopped working) is invisible in
a green run. This is the expected-skips rule, checked after the suite: a skip
is allowed only with a tagged reason from ALLOWED below, and only when this
machine really lacks that hardware; any other skip fails, naming the test and
its reason. Tests tag a skip with "LONGCTX_SKIP(code): why" in their output
(tests/support/hardware_skip.h; shell tests print it and exit 77).

  check_skips.py JUNIT.xml          ctest --output-junit's file
  check_skips.py --self-test        the rule on planted cases

Prints one summary line, e.g. "check_skips: 810 tests, 31 skipped (no_amx 27,
no_cuda_device 4), 0 unexplained", and exits 1 when any skip is unexplained.
"""
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

TAG = re.compile(r"LONGCTX_SKIP\(([a-z0-9_]+)\):\s*(.*)")


def cpu_flags(path="/proc/cpuinfo"):
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def cuda_devices():
    """NVIDIA devices visible here: nvidia-smi -L lines, else /dev/nvidiaN."""
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
        if out.returncode == 0:
            return sum(1 for l in out.stdout.splitlines() if l.startswith("GPU "))
    except (OSError, subprocess.TimeoutExpired):
        pass
    return sum(1 for n in os.listdir("/dev") if re.fullmatch(r"nvidia\d+", n)) if os.path.isdir("/dev") else 0


class Machine:
    def __init__(self, flags, gpus):
        self.flags, self.gpus = flags, gpus


# code -> (what the machine lacks, a test of the machine that is True when it does lack it)
ALLOWED = {
    "no_cuda_device": ("an NVIDIA GPU", lambda m: m.gpus == 0),
    "too_few_cuda_devices": ("a second NVIDIA GPU", lambda m: m.gpus < 2),
    "no_amx": ("AMX (amx_tile, amx_bf16)", lambda m: not {"amx_tile", "amx_bf16"} <= m.flags),
    "no_avx512_bf16": ("AVX512-BF16", lambda m: "avx512_bf16" not in m.flags),
    "no_avx512": ("AVX-512 (avx512f, avx512bw, avx512vl)", lambda m: not {"avx512f", "avx512bw", "avx512vl"} <= m.flags),
}


def skip_reason(text):
    """The tagged (code, message) in a skipped test's output, else (None, first hint)."""
    for line in text.splitlines():
        m = TAG.search(line)
        if m:
            return m.group(1), m.group(2).strip()
    lines = text.splitlines()
    hint = ""
    for i, l in enumerate(lines):  # gtest: the message is the line after "file:line: Skipped"
        if l.endswith(": Skipped") and i + 1 < len(lines):
            hint = lines[i + 1].strip()
            break
    if not hint:
        hint = next((l.strip() for l in lines if "SKIP" in l.upper() and "[  SKIPPED ]" not in l), "")
    return None, hint or "no reason printed"


def judge(cases, machine):
    """cases: [(name, skipped, output)]. Returns (summary counts, [problems])."""
    counts, problems = {}, []
    for name, skipped, output in cases:
        if not skipped:
            continue
        code, why = skip_reason(output)
        if code is None:
            problems.append(f"{name}: skipped without a tagged reason ({why})")
        elif code not in ALLOWED:
            problems.append(f"{name}: skip reason '{code}' is not an allowed hardware reason ({why})")
        elif not ALLOWED[code][1](machine):
            problems.append(f"{name}: skipped for '{code}' but this machine has {ALLOWED[code][0]} ({why})")
        else:
            counts[code] = counts.get(code, 0) + 1
    return counts, problems


def read_junit(path):
    root = ET.parse(path).getroot()
    cases = []
    for tc in root.iter("testcase"):
        skipped = tc.find("skipped") is not None or tc.get("status") == "notrun"
        out = "".join((e.text or "") for e in tc.iter("system-out"))
        cases.append((tc.get("name"), skipped, out))
    return cases


def report(cases, machine):
    counts, problems = judge(cases, machine)
    skipped = sum(1 for c in cases if c[1])
    by = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    for p in problems:
        print(f"check_skips: UNEXPLAINED: {p}")
    print(f"check_skips: {len(cases)} tests, {skipped} skipped" + (f" ({by})" if by else "") +
          f", {len(problems)} unexplained")
    return 1 if problems else 0


def self_test():
    amx = Machine({"avx2", "avx512f", "avx512bw", "avx512vl", "avx512_bf16", "amx_tile", "amx_bf16"}, 0)
    avx2 = Machine({"avx2"}, 0)
    gpu = Machine({"avx2"}, 1)
    gtest = "x.cc:9: Skipped\nLONGCTX_SKIP(%s): this CPU has no %s\n[  SKIPPED ] T.t (0 ms)\n"
    planted = [  # (machine, case, want problems)
        (avx2, ("A", True, gtest % ("no_amx", "AMX")), 0),
        (amx, ("A", True, gtest % ("no_amx", "AMX")), 1),          # the machine has AMX
        (avx2, ("B", True, gtest % ("no_avx512_bf16", "bf16")), 0),
        (amx, ("B", True, gtest % ("no_avx512_bf16", "bf16")), 1),
        (avx2, ("C", True, gtest % ("no_avx512", "avx512")), 0),
        (amx, ("C", True, gtest % ("no_avx512", "avx512")), 1),
        (avx2, ("D", True, "LONGCTX_SKIP(no_cuda_device): no GPU\n"), 0),
        (gpu, ("D", True, "LONGCTX_SKIP(no_cuda_device): no GPU\n"), 1),  # a GPU is here
        (gpu, ("E", True, "LONGCTX_SKIP(too_few_cuda_devices): 1 GPU for 2 ranks\n"), 0),
        (avx2, ("F", True, "x.cc:3: Skipped\ntokenizer files not installed\n"), 1),  # untagged
        (avx2, ("G", True, "SKIP: slurm_test: 'srun' not found\n"), 1),              # shell, untagged
        (avx2, ("H", True, "LONGCTX_SKIP(no_tmpfs_mount): cannot mount\n"), 1),     # not hardware
        (avx2, ("I", True, ""), 1),                                                   # nothing printed
        (amx, ("J", False, "LONGCTX_SKIP(no_amx): printed but the test ran\n"), 0),  # not skipped
    ]
    bad = 0
    for i, (m, case, want) in enumerate(planted):
        _, problems = judge([case], m)
        ok = len(problems) == want
        bad += not ok
        print(f"check_skips self-test {i}: {'ok' if ok else 'WRONG'}: {case[0]} -> {problems or 'allowed'}")
    print("check_skips self-test: " + ("PASS" if bad == 0 else f"FAIL ({bad})"))
    return 1 if bad else 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) != 2:
        print(__doc__)
        return 2
    if not os.path.exists(argv[1]):
        print(f"check_skips: FAIL: no JUnit file {argv[1]} (ctest --output-junit)")
        return 1
    return report(read_junit(argv[1]), Machine(cpu_flags(), cuda_devices()))


if __name__ == "__main__":
    sys.exit(main(sys.argv))

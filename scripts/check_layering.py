#!/usr/bin/env python3
"""Fails when a longctx target links, or a source file includes, across a layer.

Why: the include directories are global (the source root), so the compiler
lets any file include any header, and a static library's missing link only
shows when a binary needs the symbol. Without this check nothing stops
model/ from reaching into kernels/cpu or data/ from including a model header,
and the CMake link graph drifts from the design: kernels <- model <- optim <-
train, data/ and launch/ on the kernels interface only. ctest runs it
(tests/CMakeLists.txt), so CI does.

Usage: check_layering.py SOURCE_DIR [BUILD_DIR] [--dot FILE] [--graph]
  (a) links: the direct link dependencies of every longctx_* target, from
      `cmake --graphviz` of a throwaway configure with BUILD_DIR's options
      (never BUILD_DIR itself: ctest may be running from it), or from --dot;
  (b) includes: every #include in base/ kernels/ model/ optim/ data/ launch/
      train/ against the table below;
  (c) circles: no two rooms (a room = a folder's foo.h + foo.cc + foo_*.cc
      of the same stem) include each other through any chain.
  --graph prints train/'s include graph between its layers (and the rooms
  of each) instead of only the verdict.
Python 3 standard library only. tests/layering/check_layering_test.py plants
a violation of every rule in a scratch tree and expects this check to fail.
"""

import os
import re
import subprocess
import sys
import tempfile

# ---------------------------------------------------------------------------
# The one table: the layers and what each may use. A layer is both a set of
# source folders and the libraries built from them; a layer may include the
# headers of, and link the libraries of, exactly the layers listed for it.
#
#   base             log, status macro, child processes, the command error
#                    line: below everything, includes nothing of longctx.
#   kernels/math     header-only math shared by CPU and CUDA kernels
#                    (__host__ __device__): pure, no device, no CUDA headers.
#   kernels          the interface: Tensor, op params, Backend
#                    (library longctx_tensor; kernels/math is part of it).
#   kernels/cpu      the CPU backend (longctx_cpu: OpenBLAS, oneDNN, OpenMP).
#   kernels/cuda     the CUDA backend (longctx_cuda).
#   kernels/registry MakeBackend and FindBackend by name (longctx_backends;
#                    kernels/backend_registry.h, backend_registry.cc,
#                    backend_info.cc): knows every backend and its options.
#   model            computes through the Backend interface only: whoever runs
#                    a model picks the backend, so model/ never names one.
#   optim            updates a model's parameters, through the interface.
#   data             corpora, tokenizers, token files: no model, no device.
#   launch           processes and communicators: tensors, no model.
#   train            the top layer, itself four floors (train/CMakeLists.txt):
#     train/parts    what a run is made of, knowing no trainer: the config
#                    file, batches, evaluation, checkpoint formats, the NIAH
#                    probe, metrics and plots (train/*.cc but the two below,
#                    checkpoint/, probe/, report/);
#     train/setup    a TrainConfig turned into options and objects (setup/);
#                    makes the backend by name (kernels/backend_registry.h,
#                    which the config loader below it also asks whether a
#                    name is a backend), so train/ links the registry;
#     train/engine   the loop: trainer, train_step, hooks/, parallel/;
#     train/apps     the applications: cli/, bench/, convert/, analyze/.
#   train/bench      benchmarks must time the CPU GEMM paths themselves
#                    (kernels/cpu/gemm_library.h, gemm_bf16.h): the one place
#                    above kernels/ that includes a concrete backend.
# ---------------------------------------------------------------------------
INTERFACE = {"base", "kernels", "kernels/math"}
LOWER = INTERFACE | {"model", "optim", "data", "launch"}
TRAIN_PARTS = LOWER | {"train/parts"}
TRAIN_SETUP = TRAIN_PARTS | {"train/setup"}
TRAIN_ENGINE = TRAIN_SETUP | {"train/engine"}
TRAIN_APPS = TRAIN_ENGINE | {"train/apps"}
BACKENDS = {"kernels/registry", "kernels/cpu", "kernels/cuda", "blas", "dnnl"}
ALLOWED = {
    "base": {"base"},
    "kernels/math": {"kernels/math"},
    "kernels": INTERFACE,
    "kernels/cpu": INTERFACE | {"kernels/cpu", "blas", "dnnl"},
    "kernels/cuda": INTERFACE | {"kernels/cuda"},
    "kernels/registry": INTERFACE | {"kernels/registry", "kernels/cpu", "kernels/cuda"},
    "model": INTERFACE | {"model"},
    "optim": INTERFACE | {"model", "optim"},
    "data": INTERFACE | {"data"},
    "launch": INTERFACE | {"launch"},
    "train/parts": TRAIN_PARTS | {"kernels/registry"},
    "train/setup": TRAIN_SETUP | BACKENDS,
    "train/engine": TRAIN_ENGINE | BACKENDS,
    "train/apps": TRAIN_APPS | BACKENDS,
}
# Includes are stricter than links for train/: it links the backends (to
# construct one by name) and includes the registry's header, but only the
# benchmarks include a concrete backend's headers.
INCLUDE_ALLOWED = {k: v - ({"kernels/cpu", "kernels/cuda", "blas", "dnnl"} if k.startswith("train") else set())
                   for k, v in ALLOWED.items()}
INCLUDE_ALLOWED["train/apps"] = INCLUDE_ALLOWED["train/apps"] | {"train/bench"}
INCLUDE_ALLOWED["train/bench"] = INCLUDE_ALLOWED["train/apps"] | {"kernels/cpu"}
TRAIN_FLOORS = ["train/parts", "train/setup", "train/engine", "train/apps"]

# Library name -> layer. A longctx_* library not listed here (or matching no
# prefix rule below) is an error: a new library must say where it sits.
TARGET_LAYER = {
    "longctx_base": "base",
    "longctx_train_proto": "train/parts",
    "longctx_train_parts": "train/parts",
    "longctx_train_setup": "train/setup",
    "longctx_train_engine": "train/engine",
    "longctx_train": "train/apps",
    "longctx_tensor": "kernels",
    "longctx_cpu": "kernels/cpu",
    "longctx_cuda": "kernels/cuda",
    "longctx_backends": "kernels/registry",
    "longctx_blas": "blas",
    "longctx_dnnl": "dnnl",
}
# longctx_model_proto, longctx_train_proto, a future longctx_train_cli ... sit
# in the layer their name starts with.
PREFIX_LAYERS = ["model", "optim", "data", "launch"]
# Libraries that sit above every layer: they may link anything (test code).
UNCHECKED_TARGETS = {"longctx_test_support"}
# The CUDA stack (runtime, cuBLAS, NCCL): the CUDA backend's kernels, and
# launch/'s NCCL communicator, which moves device buffers (cudaStream_t,
# nccl*). Nothing else may include its headers or link it: a model, optimizer
# or trainer reaches the device only through the Backend and the Communicator.
CUDA_LAYERS = {"kernels/cuda", "launch"}
CUDA_LINK = re.compile(r"^CUDA::")

SOURCE_DIRS = ["base", "kernels", "model", "optim", "data", "launch", "train"]
# The registry's files, in kernels/ beside the interface (kernels/CMakeLists.txt
# keeps the .cc files out of longctx_tensor).
REGISTRY_FILES = {"kernels/backend_registry.h", "kernels/backend_registry.cc", "kernels/backend_info.cc"}
SOURCE_EXT = (".h", ".cc", ".cu", ".cuh")
CUDA_HEADER = re.compile(r"^(cuda|cublas|cufft|curand|cusparse|nvrtc|nccl|thrust/|cub/|device_launch)")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')


def target_layer(name):
    if name in TARGET_LAYER:
        return TARGET_LAYER[name]
    for layer in PREFIX_LAYERS:
        if name == "longctx_" + layer or name.startswith("longctx_" + layer + "_"):
            return layer
    return None


def train_layer(rel):
    """The floor of a path under train/ (a source file or an include)."""
    parts = rel.split("/")
    if len(parts) > 2 and parts[1] == "bench":
        return "train/bench"
    if len(parts) > 2 and parts[1] in ("cli", "convert", "analyze"):
        return "train/apps"
    if len(parts) > 2 and parts[1] == "setup":
        return "train/setup"
    if len(parts) > 2 and parts[1] in ("hooks", "parallel"):
        return "train/engine"
    if len(parts) == 2 and parts[1].split(".")[0] in ("trainer", "train_step"):
        return "train/engine"
    return "train/parts"


def file_layer(rel):
    """The layer of a source file, by its path relative to the source root."""
    parts = rel.split("/")
    if parts[0] == "kernels":
        if len(parts) > 2 and parts[1] in ("math", "cpu", "cuda"):
            return "kernels/" + parts[1]
        if rel in REGISTRY_FILES:
            return "kernels/registry"
        return "kernels"
    if parts[0] == "train":
        return train_layer(rel)
    return parts[0]


def include_layer(path):
    """The layer a quoted include names, or None for third-party headers."""
    parts = path.split("/")
    if parts[0] == "kernels":
        if len(parts) > 2 and parts[1] in ("math", "cpu", "cuda"):
            return "kernels/" + parts[1]
        if path in REGISTRY_FILES:
            return "kernels/registry"
        return "kernels"
    if parts[0] == "train" and len(parts) > 1:
        return train_layer(path)
    if parts[0] in PREFIX_LAYERS or parts[0] == "base":
        return parts[0]
    return None


def room_of(rel):
    """A room: a folder's foo.h with foo.cc (and foo_*.cc split from it only
    when no foo_*.h exists, which check_circles resolves)."""
    d, f = os.path.split(rel)
    stem = f.rsplit(".", 1)[0]
    return f"{d}/{stem}" if d else stem


def include_graph(src):
    """{room: {rooms it includes}} over SOURCE_DIRS, quoted includes only."""
    graph, files = {}, {}
    for top in SOURCE_DIRS:
        for root, dirs, names in os.walk(os.path.join(src, top)):
            dirs.sort()
            for f in sorted(names):
                if f.endswith(SOURCE_EXT):
                    rel = os.path.relpath(os.path.join(root, f), src).replace(os.sep, "/")
                    files[rel] = room_of(rel)
    rooms = set(files.values())
    for rel, room in files.items():
        deps = graph.setdefault(room, set())
        with open(os.path.join(src, rel), encoding="utf-8", errors="replace") as fh:
            for line in fh:
                m = INCLUDE_RE.match(line)
                if m and m.group(1) == '"':
                    target = room_of(m.group(2))
                    if target in rooms and target != room:
                        deps.add(target)
    return graph


def circles(graph):
    """Strongly connected components of more than one room (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def check_circles(src):
    graph = include_graph(src)
    errors = []
    for comp in circles(graph):
        ties = [f"{a} -> {b}" for a in comp for b in sorted(graph[a]) if b in comp]
        errors.append(f"include circle of {len(comp)} rooms: {', '.join(ties)}")
    return errors


def train_graph(src):
    """Lines describing train/'s floors: the rooms of each and the floor-to-
    floor include counts (an arrow only ever points down the list)."""
    graph = include_graph(src)
    floor = {r: train_layer(r + ".h") for r in graph if r.startswith("train/")}
    lines = []
    for f in TRAIN_FLOORS + ["train/bench"]:
        members = sorted(r for r, l in floor.items() if l == f)
        lines.append(f"{f} ({len(members)} rooms): {' '.join(m[len('train/'):] for m in members)}")
    counts = {}
    for r, l in floor.items():
        for d in graph[r]:
            if d in floor and floor[d] != l:
                counts[(l, floor[d])] = counts.get((l, floor[d]), 0) + 1
    for (a, b), n in sorted(counts.items()):
        lines.append(f"  {a} -> {b}: {n} includes")
    return lines


def check_includes(src):
    errors = []
    for top in SOURCE_DIRS:
        for root, dirs, files in os.walk(os.path.join(src, top)):
            dirs.sort()
            for f in sorted(files):
                if not f.endswith(SOURCE_EXT):
                    continue
                full = os.path.join(root, f)
                rel = os.path.relpath(full, src).replace(os.sep, "/")
                layer = file_layer(rel)
                allowed = INCLUDE_ALLOWED[layer]
                with open(full, encoding="utf-8", errors="replace") as fh:
                    for n, line in enumerate(fh, 1):
                        m = INCLUDE_RE.match(line)
                        if not m:
                            continue
                        kind, path = m.groups()
                        close = '"' if kind == '"' else ">"
                        where = f"{rel}:{n}: #include {kind}{path}{close}"
                        if CUDA_HEADER.match(path) and layer not in CUDA_LAYERS:
                            errors.append(f"{where}: a CUDA header outside "
                                          f"{' and '.join(sorted(CUDA_LAYERS))} (layer {layer})")
                        if kind == '"' and f.endswith((".cu", ".cuh")) and path.startswith("absl/"):
                            errors.append(f"{where}: nvcc code must not include Abseil")
                        if kind != '"':
                            continue
                        dep = include_layer(path)
                        if dep is not None and dep not in allowed:
                            errors.append(f"{where}: layer {layer} may not include layer {dep} "
                                          f"(allowed: {', '.join(sorted(allowed))})")
    return errors


def cache_value(build, key):
    try:
        with open(os.path.join(build, "CMakeCache.txt"), encoding="utf-8") as fh:
            for line in fh:
                m = re.match(re.escape(key) + r":[A-Z]+=(.*)$", line.rstrip("\n"))
                if m:
                    return m.group(1)
    except FileNotFoundError:
        pass
    return None


def graphviz(src, build):
    """cmake --graphviz of a throwaway configure with the build dir's options."""
    tmp = tempfile.mkdtemp(prefix="longctx-layering-")
    cmd = ["cmake", "-S", src, "-B", tmp, "-G", "Ninja", f"--graphviz={tmp}/deps.dot"]
    for key in ("LONGCTX_CUDA", "LONGCTX_TESTS", "CMAKE_BUILD_TYPE", "CMAKE_CXX_COMPILER",
                "CMAKE_CUDA_COMPILER"):
        v = cache_value(build, key) if build else None
        if v:
            cmd.append(f"-D{key}={v}")
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"check_layering: {' '.join(cmd)} failed:\n{r.stdout}{r.stderr}")
    with open(f"{tmp}/deps.dot", encoding="utf-8") as fh:
        text = fh.read()
    subprocess.run(["rm", "-rf", tmp])
    return text


def parse_dot(text):
    """{target: (shape, {direct link dependencies})} from a cmake --graphviz file."""
    label, shape, deps = {}, {}, {}
    for m in re.finditer(r'"(node\d+)" \[ label = "([^"]*)", shape = (\w+) \]', text):
        label[m.group(1)] = m.group(2)
        shape[m.group(2)] = m.group(3)
    for m in re.finditer(r'"(node\d+)" -> "(node\d+)"', text):
        a, b = label.get(m.group(1)), label.get(m.group(2))
        if a is not None and b is not None:
            deps.setdefault(a, set()).add(b)
    return {t: (shape[t], deps.get(t, set())) for t in shape}


def check_links(graph):
    errors, checked = [], 0
    for target in sorted(graph):
        kind, deps = graph[target]
        if kind == "egg" or not target.startswith("longctx_") or target in UNCHECKED_TARGETS:
            continue  # executables and test code may link anything
        layer = target_layer(target)
        if layer is None:
            errors.append(f"target {target}: no layer in scripts/check_layering.py's table; "
                          "add it there")
            continue
        checked += 1
        allowed = ALLOWED.get(layer, set())
        for dep in sorted(deps):
            if CUDA_LINK.match(dep) and layer not in CUDA_LAYERS:
                errors.append(f"target {target} (layer {layer}) links {dep}: only "
                              f"{' and '.join(sorted(CUDA_LAYERS))} may link the CUDA stack")
            if not dep.startswith("longctx_") or dep in UNCHECKED_TARGETS:
                continue
            dep_layer = target_layer(dep)
            if dep_layer is None:
                errors.append(f"target {target} links {dep}, which has no layer in the table")
            elif dep_layer != layer and dep_layer not in allowed:
                errors.append(f"target {target} (layer {layer}) links {dep} (layer {dep_layer}); "
                              f"allowed: {', '.join(sorted(allowed))}")
    return errors, checked


def main(argv):
    args, dot, show = [], None, False
    it = iter(argv[1:])
    for a in it:
        if a == "--graph":
            show = True
        elif a == "--dot":
            dot = next(it, None)
        elif a.startswith("--dot="):
            dot = a.split("=", 1)[1]
        else:
            args.append(a)
    if not args or len(args) > 2:
        sys.exit(__doc__)
    src = os.path.abspath(args[0])
    build = os.path.abspath(args[1]) if len(args) > 1 else None
    if dot:
        with open(dot, encoding="utf-8") as fh:
            text = fh.read()
    else:
        text = graphviz(src, build)
    graph = parse_dot(text)
    link_errors, checked = check_links(graph)
    if checked == 0:
        link_errors.append("no longctx_* library found in the graphviz output: the check checked nothing")
    include_errors = check_includes(src)
    circle_errors = check_circles(src)
    if show:
        for line in train_graph(src):
            print(line)
    for e in link_errors + include_errors + circle_errors:
        print("LAYERING:", e)
    print(f"check_layering: {checked} libraries, {len(link_errors)} link and "
          f"{len(include_errors)} include violations, {len(circle_errors)} include circles")
    return 1 if link_errors or include_errors or circle_errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/env python3
"""Why: a layering check that passes on the tree proves nothing unless it
also fails where it should. Each case here writes a small scratch source tree
(and a cmake --graphviz file) that is clean but for one planted violation of
one rule, runs scripts/check_layering.py on it, and expects exit status 1 with
the violation named; the clean scratch tree must pass (status 0).

Usage: check_layering_test.py SOURCE_DIR   (ctest: layering_planted)
"""
import os
import subprocess
import sys
import tempfile
import unittest

CHECK = None

# A clean tree: one room per floor of train/, each including the one below.
CLEAN = {
    "base/log.h": "",
    "kernels/tensor.h": '#include "base/log.h"\n',
    "model/transformer.h": '#include "kernels/tensor.h"\n',
    "train/evaluate.h": '#include "model/transformer.h"\n',
    "train/checkpoint/checkpoint.h": '#include "train/evaluate.h"\n',
    "train/setup/training_data.h": '#include "train/checkpoint/checkpoint.h"\n',
    "train/hooks/hook.h": '#include "train/setup/training_data.h"\n',
    "train/trainer.h": '#include "train/hooks/hook.h"\n',
    "train/cli/commands.cc": '#include "train/trainer.h"\n#include "train/bench/bench.h"\n',
    "train/bench/bench.h": '#include "train/setup/training_data.h"\n#include "kernels/cpu/gemm.h"\n',
    "kernels/cpu/gemm.h": '#include "kernels/tensor.h"\n',
}
CLEAN_DOT = """digraph "GG" {
"node0" [ label = "longctx_base", shape = octagon ];
"node1" [ label = "longctx_tensor", shape = octagon ];
"node2" [ label = "longctx_train_parts", shape = octagon ];
"node3" [ label = "longctx_train_setup", shape = octagon ];
"node4" [ label = "longctx_train_engine", shape = octagon ];
"node5" [ label = "longctx_train", shape = octagon ];
"node1" -> "node0" // longctx_tensor -> longctx_base
"node2" -> "node1"
"node3" -> "node2"
"node4" -> "node3"
"node5" -> "node4"
}
"""


def run(files, dot=CLEAN_DOT):
    with tempfile.TemporaryDirectory() as d:
        for rel, text in files.items():
            os.makedirs(os.path.join(d, os.path.dirname(rel)), exist_ok=True)
            with open(os.path.join(d, rel), "w") as fh:
                fh.write(text)
        with open(os.path.join(d, "deps.dot"), "w") as fh:
            fh.write(dot)
        r = subprocess.run([sys.executable, CHECK, d, "--dot", os.path.join(d, "deps.dot")],
                           capture_output=True, text=True)
        return r.returncode, r.stdout + r.stderr


def planted(rel, text):
    files = dict(CLEAN)
    files[rel] = files.get(rel, "") + text
    return files


class PlantedViolations(unittest.TestCase):
    def assertFailsWith(self, files, needle, dot=CLEAN_DOT):
        code, out = run(files, dot)
        self.assertEqual(code, 1, out)
        self.assertIn(needle, out)

    def test_clean_tree_passes(self):
        code, out = run(CLEAN)
        self.assertEqual(code, 0, out)
        self.assertIn("0 link and 0 include violations, 0 include circles", out)

    def test_parts_may_not_include_engine(self):
        self.assertFailsWith(planted("train/evaluate.h", '#include "train/trainer.h"\n'),
                             "layer train/parts may not include layer train/engine")

    def test_parts_may_not_include_setup(self):
        self.assertFailsWith(planted("train/checkpoint/checkpoint.h", '#include "train/setup/training_data.h"\n'),
                             "layer train/parts may not include layer train/setup")

    def test_setup_may_not_include_engine(self):
        self.assertFailsWith(planted("train/setup/training_data.h", '#include "train/hooks/hook.h"\n'),
                             "layer train/setup may not include layer train/engine")

    def test_engine_may_not_include_apps(self):
        self.assertFailsWith(planted("train/hooks/hook.h", '#include "train/cli/commands.h"\n'),
                             "layer train/engine may not include layer train/apps")

    def test_only_bench_includes_a_concrete_backend(self):
        self.assertFailsWith(planted("train/trainer.h", '#include "kernels/cpu/gemm.h"\n'),
                             "layer train/engine may not include layer kernels/cpu")

    def test_base_includes_nothing_of_longctx(self):
        self.assertFailsWith(planted("base/log.h", '#include "kernels/tensor.h"\n'),
                             "layer base may not include layer kernels")

    def test_circle_within_one_floor(self):
        files = planted("train/hooks/hook.h", '#include "train/hooks/eval_hook.h"\n')
        files["train/hooks/eval_hook.h"] = '#include "train/hooks/hook.h"\n'
        self.assertFailsWith(files, "include circle of 2 rooms")

    def test_link_up_a_floor(self):
        dot = CLEAN_DOT.replace("}\n", '"node2" -> "node4"\n}\n')
        self.assertFailsWith(CLEAN, "target longctx_train_parts (layer train/parts) links longctx_train_engine", dot)

    def test_unknown_library(self):
        dot = CLEAN_DOT.replace("}\n", '"node9" [ label = "longctx_train_extra", shape = octagon ];\n}\n')
        self.assertFailsWith(CLEAN, "target longctx_train_extra: no layer", dot)


if __name__ == "__main__":
    CHECK = os.path.join(os.path.abspath(sys.argv.pop(1)), "scripts", "check_layering.py")
    unittest.main(verbosity=2)

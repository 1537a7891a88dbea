// Why: a skipped test proves nothing, so a skip must be one the machine
// explains. Tests skip only through LONGCTX_SKIP_WITHOUT(code), which writes
// "LONGCTX_SKIP(code): " before the human message; scripts/check_skips.py reads
// every skipped test's output after the suite (ctest's JUnit file), allows a
// code only if this machine really lacks that hardware (/proc/cpuinfo flags,
// an NVIDIA device), and fails CI on any other skip, naming the test and its
// reason. Shell tests print the same tag and exit 77 (SKIP_RETURN_CODE).
#ifndef LONGCTX_TESTS_SUPPORT_HARDWARE_SKIP_H_
#define LONGCTX_TESTS_SUPPORT_HARDWARE_SKIP_H_

#include "gtest/gtest.h"

namespace longctx::test {

// The only reasons a test may skip (scripts/check_skips.py, ALLOWED).
inline constexpr char kNoCudaDevice[] = "no_cuda_device";
inline constexpr char kNoAmx[] = "no_amx";
inline constexpr char kNoAvx512Bf16[] = "no_avx512_bf16";
inline constexpr char kNoAvx512[] = "no_avx512";

}  // namespace longctx::test

// Skips the current test with a tagged reason: LONGCTX_SKIP_WITHOUT(kNoAmx) << "...".
#define LONGCTX_SKIP_WITHOUT(code) GTEST_SKIP() << "LONGCTX_SKIP(" << (code) << "): "

#endif  // LONGCTX_TESTS_SUPPORT_HARDWARE_SKIP_H_

// Why: a round-robin best-of timing harness for the throwaway microbenchmarks of this folder
// (pairs_bench.cc): each test's best run over rounds spread across `secs`, so that a VM whose
// speed swings for seconds at a time still shows its unshared speed.
// round-robin timing: each test's best over many rounds spread across `secs`
#include <chrono>
#include <functional>
#include <vector>
#include <string>
#include <cstdio>
#include <algorithm>
struct RR {
  struct T { std::string name; std::function<void()> f; double per; double best = 1e30; };
  std::vector<T> tests;
  void add(std::string n, std::function<void()> f, double per) { tests.push_back({n, f, per}); }
  void run(double secs) {
    auto start = std::chrono::steady_clock::now();
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < secs)
      for (auto& t : tests) {
        for (int r = 0; r < 5; ++r) {
          auto t0 = std::chrono::steady_clock::now();
          t.f();
          t.best = std::min(t.best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
      }
    for (auto& t : tests) printf("%-34s %9.2f ns\n", t.name.c_str(), t.best / t.per * 1e9);
  }
};

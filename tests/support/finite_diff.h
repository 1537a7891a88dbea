// Why: every analytic gradient in longctx (each op's backward, and later the
// whole model's) is checked the same way: central differences in double on a
// scalar loss, compared coordinate by coordinate with a relative error whose
// denominator has a floor, so coordinates whose gradient is ~0 do not turn
// finite-difference rounding noise into a failure. This header is that checker
// plus the small deterministic data helpers the checks need.
//
// Typical use (an op's backward against its forward):
//   std::vector<double> x = RandomUniform(n, /*seed=*/1), g = RandomUniform(m, 2);
//   auto loss = [&] { Forward(x -> y); return Dot(y, g); };   // L = sum(y * G)
//   Backward(dy = G -> dx);
//   GradCheckResult r = CheckGradient(loss, x.data(), n, dx.data());
//   EXPECT_LT(r.max_rel_error, 1e-6) << r.ToString();
#ifndef LONGCTX_TESTS_SUPPORT_FINITE_DIFF_H_
#define LONGCTX_TESTS_SUPPORT_FINITE_DIFF_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace longctx::test {

struct GradCheckOptions {
  // Coordinates to check: <= 0 or >= n checks all of them; otherwise that many
  // distinct coordinates drawn with FreshSeed(seed) (test_seed.h): other ones
  // every run, the same ones for one LONGCTX_TEST_SEED.
  int64_t samples = 0;
  uint64_t seed = 1;
  // Central-difference step (absolute). The step actually used is the
  // representable (p + eps) - (p - eps), so it is exact.
  double eps = 1e-6;
  // rel_error_i = max(0, |num_i - ana_i| - noise_i) /
  //               max(|num_i|, |ana_i|, abs_floor, scale_floor * max_j |ana_j|)
  // (max_j over all n coordinates).
  // noise_i = noise_ulps * DBL_EPSILON * max(|L(p+)|, |L(p-)|) / (2 eps) is the
  // part of the difference the final rounding of the two loss values alone
  // can explain: each carries up to half an ulp, so their difference up to one
  // ulp of |L| (noise_ulps = 1, the tight bound). At |L| ~ 10 and eps = 1e-6
  // that is ~1e-9 in the derivative, as large as a 1e-6 relative error of a
  // 1e-3 gradient. Set noise_ulps = 0 for the raw difference; raise it when the
  // loss itself is computed with more rounding than its final cast (then also
  // prefer accumulating it in long double, as Dot does).
  // The scale floor makes a coordinate whose true gradient is ~0 count relative
  // to the gradient's overall size rather than to itself.
  double abs_floor = 1e-12;
  double scale_floor = 1e-3;
  double noise_ulps = 1.0;
};

struct GradCheckResult {
  double max_rel_error = 0.0;  // over the checked coordinates (see GradCheckOptions)
  double max_abs_error = 0.0;  // raw max |num - ana|, no noise allowance
  double max_noise = 0.0;      // largest noise allowance used
  int64_t worst_index = -1;  // coordinate of max_rel_error
  double worst_numeric = 0.0, worst_analytic = 0.0;
  int64_t checked = 0;
  std::string ToString() const;
};

// d loss / d *param by central differences; *param is restored bit-exactly.
// If loss_scale is set it receives max(|L(p+)|, |L(p-)|).
double CentralDifference(const std::function<double()>& loss, double* param, double eps,
                         double* loss_scale = nullptr);

// Compares analytic_grad[i] with the central difference of loss() w.r.t.
// params[i] for the chosen coordinates. loss() must read params (it is called
// 2 * checked times, with one coordinate perturbed); params are restored.
GradCheckResult CheckGradient(const std::function<double()>& loss, double* params, int64_t n,
                              const double* analytic_grad, const GradCheckOptions& options = {});

// The same check, returning only max_rel_error (default floors).
double MaxRelError(const std::function<double()>& loss, double* params, int64_t n, const double* analytic_grad,
                   int samples, double eps, uint64_t seed);

// n values uniform in [lo, hi] from std::mt19937(seed); with lo < 0 < hi,
// values are kept at least min_abs away from zero (never exactly zero).
std::vector<double> RandomUniform(int64_t n, uint64_t seed, double lo = -1.0, double hi = 1.0,
                                  double min_abs = 1e-3);

// sum_i a[i] * b[i], accumulated in long double: the "sum(out * G)" loss of a
// gradient check, as free of rounding noise as the inputs allow.
double Dot(const double* a, const double* b, int64_t n);
inline double Dot(const std::vector<double>& a, const std::vector<double>& b) {
  return Dot(a.data(), b.data(), static_cast<int64_t>(a.size() < b.size() ? a.size() : b.size()));
}

}  // namespace longctx::test

#endif  // LONGCTX_TESTS_SUPPORT_FINITE_DIFF_H_

// Why: the implementation of the shared gradient checker (finite_diff.h); kept
// in the test-support library so op tests and whole-model tests use one
// definition of "relative error".
#include "tests/support/finite_diff.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>

#include "tests/support/test_seed.h"

namespace longctx::test {

std::string GradCheckResult::ToString() const {
  std::ostringstream os;
  os.precision(10);
  os << "max_rel_error=" << max_rel_error << " max_abs_error=" << max_abs_error << " at index " << worst_index
     << " (numeric " << worst_numeric << ", analytic " << worst_analytic << "), noise allowance <= " << max_noise
     << ", " << checked << " checked";
  return os.str();
}

double CentralDifference(const std::function<double()>& loss, double* param, double eps, double* loss_scale) {
  const double saved = *param;
  const double plus = saved + eps, minus = saved - eps;
  *param = plus;
  const double f_plus = loss();
  *param = minus;
  const double f_minus = loss();
  *param = saved;
  if (loss_scale != nullptr) *loss_scale = std::max(std::fabs(f_plus), std::fabs(f_minus));
  return (f_plus - f_minus) / (plus - minus);
}

GradCheckResult CheckGradient(const std::function<double()>& loss, double* params, int64_t n,
                              const double* analytic_grad, const GradCheckOptions& options) {
  GradCheckResult result;
  if (n <= 0) return result;
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), int64_t{0});
  if (options.samples > 0 && options.samples < n) {
    std::mt19937_64 rng(FreshSeed(options.seed));
    for (int64_t i = 0; i < options.samples; ++i) {  // partial Fisher-Yates
      std::uniform_int_distribution<int64_t> pick(i, n - 1);
      std::swap(idx[i], idx[pick(rng)]);
    }
    idx.resize(static_cast<size_t>(options.samples));
    std::sort(idx.begin(), idx.end());
  }
  double scale = 0.0;
  for (int64_t i = 0; i < n; ++i) scale = std::max(scale, std::fabs(analytic_grad[i]));
  const double floor = std::max(options.abs_floor, options.scale_floor * scale);
  for (int64_t i : idx) {
    double loss_scale = 0.0;
    const double num = CentralDifference(loss, params + i, options.eps, &loss_scale);
    const double ana = analytic_grad[i];
    const double abs_err = std::fabs(num - ana);
    const double noise =
        options.noise_ulps * std::numeric_limits<double>::epsilon() * loss_scale / (2.0 * options.eps);
    const double denom = std::max({std::fabs(num), std::fabs(ana), floor});
    // A NaN anywhere must fail the check, not vanish in a max().
    const double rel =
        std::isfinite(num) && std::isfinite(ana) ? std::max(0.0, abs_err - noise) / denom : INFINITY;
    result.max_noise = std::max(result.max_noise, noise);
    result.max_abs_error = std::max(result.max_abs_error, std::isfinite(abs_err) ? abs_err : INFINITY);
    if (rel > result.max_rel_error || result.worst_index < 0) {
      result.max_rel_error = std::max(result.max_rel_error, rel);
      result.worst_index = i;
      result.worst_numeric = num;
      result.worst_analytic = ana;
    }
    ++result.checked;
  }
  return result;
}

double MaxRelError(const std::function<double()>& loss, double* params, int64_t n, const double* analytic_grad,
                   int samples, double eps, uint64_t seed) {
  GradCheckOptions options;
  options.samples = samples;
  options.eps = eps;
  options.seed = seed;
  return CheckGradient(loss, params, n, analytic_grad, options).max_rel_error;
}

std::vector<double> RandomUniform(int64_t n, uint64_t seed, double lo, double hi, double min_abs) {
  std::mt19937 rng(FreshSeed(seed));
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(static_cast<size_t>(std::max<int64_t>(n, 0)));
  const bool straddles = lo < 0.0 && hi > 0.0;
  for (double& x : v) {
    do {
      x = dist(rng);
    } while (x == 0.0 || (straddles && std::fabs(x) < min_abs));
  }
  return v;
}

double Dot(const double* a, const double* b, int64_t n) {
  long double s = 0.0L;
  for (int64_t i = 0; i < n; ++i) s += static_cast<long double>(a[i]) * static_cast<long double>(b[i]);
  return static_cast<double>(s);
}

}  // namespace longctx::test

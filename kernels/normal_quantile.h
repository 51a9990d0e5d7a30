// Standard normal distribution helpers used by the Gaussian-k threshold and by tests.
// NormalQuantile is Φ⁻¹ (Wichura 1988, algorithm AS241 PPND16), relative accuracy about 1e-16,
// absolute error well below 1e-9 over (0, 1). Pure functions; thread-safe.
#ifndef SIEVE_KERNELS_NORMAL_QUANTILE_H_
#define SIEVE_KERNELS_NORMAL_QUANTILE_H_

namespace sieve {

// Φ⁻¹(p) for p in (0, 1); returns -inf at 0, +inf at 1 and NaN outside [0, 1].
double NormalQuantile(double p);

// Φ(x), the standard normal CDF.
double NormalCdf(double x);

// φ(x), the standard normal density.
double NormalPdf(double x);

}  // namespace sieve

#endif  // SIEVE_KERNELS_NORMAL_QUANTILE_H_

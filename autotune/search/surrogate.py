"""The ``auto`` strategy's models (scikit-learn, imported only when the strategy is made).

- ``TransferPrior``: gradient-boosted trees (``HistGradientBoostingRegressor``: fast, handles missing
  values, no scaling needed) predicting ``log(time / best time of that shape)`` from a config's parameters,
  the shape's log2 dims and the kernel's analytic features, trained once per shape searched on the other
  shapes' measurements in the store (weighted: other devices and software versions count less).
- ``PriorSpread``: how much history stands behind the prior at each candidate (the weighted history points
  near it in parameter space): few, far or low-weight points (a partial search, another GPU, a far shape)
  make the prior's uncertainty wide there, so the acquisition explores where history is thin.
- ``prior_trust``: how well the prior ranks this shape's own results (Kendall's tau), blended with the
  trust the history earned before any result; the prior's weight in the acquisition, down to 0.
- ``LocalCorrection``: a Gaussian process on this shape's residuals ``log(time) - prior``, with one length
  scale per column (ARD Matérn 5/2) plus white noise; its hyperparameters are re-fitted only every few
  results (a fit with fixed hyperparameters costs a few ms), so proposing stays far below a measurement."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

#: re-fit the GP's hyperparameters after this many new results, and after the results grew by this fraction
#: (else reuse the last fitted kernel): a fit costs ~0.1-0.2 s in the orchestrator, the posterior with fixed
#: hyperparameters ~1 ms, and the hyperparameters settle as data grows (12 fits in 100 results, not 25)
REFIT_EVERY = 4
REFIT_GROWTH = 0.25


_CONTROLLER: Any = None


def single_threaded():
    """OpenMP/BLAS limited to one thread: the models are small, and beside compile workers (or on a
    loaded machine) a thread pool per core made one tree fit take 20 s instead of 0.5 s. One controller
    for the process: ``threadpool_limits`` scans the loaded libraries on every call (~4 ms, more than a
    posterior)."""
    global _CONTROLLER
    if _CONTROLLER is None:
        from threadpoolctl import ThreadpoolController

        _CONTROLLER = ThreadpoolController()
    return _CONTROLLER.limit(limits=1)


class TransferPrior:
    def __init__(self, seed: int | None = None):
        from sklearn.ensemble import HistGradientBoostingRegressor

        self.model = HistGradientBoostingRegressor(
            max_iter=150, learning_rate=0.1, max_leaf_nodes=31, min_samples_leaf=8, random_state=seed or 0
        )

    def fit(self, x: np.ndarray, y: np.ndarray, w: np.ndarray) -> TransferPrior:
        # a column no history row sets (a parameter added to the space since) teaches nothing, and the
        # trees' binning fails on it: left out, for prediction too
        self.cols = ~np.isnan(x).all(axis=0)
        with single_threaded():
            self.model.fit(x[:, self.cols], y, sample_weight=w)
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        with single_threaded():
            return self.model.predict(x[:, self.cols])


#: the prior's uncertainty (in log time) where no history point is near: a factor e^0.35 ~ 1.4
PRIOR_SD = 0.35
#: nearest history points read per candidate, and the distance (standardized parameter units, per
#: parameter) at which a point counts half
SPREAD_NEIGHBOURS = 16
SPREAD_SCALE = 0.35
#: history rows the spread's index keeps at most (a random subset, weights scaled up)
SPREAD_ROWS = 20000
#: Kendall's tau at which the prior has earned full trust (a prior's favourites measured on the target
#: are a narrow sample: ties and noise keep tau well below 1 even for a good prior)
TAU_FULL = 0.4
#: results before the measured rank correlation counts as much as the history's own trust
TRUST_PSEUDO = 4


class PriorSpread:
    def __init__(self, x_hist: np.ndarray, w_hist: np.ndarray, x_pool: np.ndarray, seed: int | None = None):
        from sklearn.neighbors import NearestNeighbors

        n, d = x_hist.shape
        if n > SPREAD_ROWS:
            keep = np.random.default_rng(seed or 0).choice(n, SPREAD_ROWS, replace=False)
            x_hist, w_hist = x_hist[keep], w_hist[keep] * (n / SPREAD_ROWS)
        # both scaled as the candidates are (the history may lie elsewhere in the space)
        self._mu, self._sd = _moments(x_pool)
        self.w = w_hist
        self.k = min(SPREAD_NEIGHBOURS, len(x_hist))
        self.scale = SPREAD_SCALE * math.sqrt(max(1, d))
        with single_threaded():
            self.nn = NearestNeighbors(n_neighbors=self.k).fit(self._scaled(x_hist))

    def _scaled(self, x: np.ndarray) -> np.ndarray:
        out = (np.asarray(x, dtype=float) - self._mu) / self._sd
        out[np.isnan(out)] = -2.0
        return out

    def density(self, x: np.ndarray) -> np.ndarray:
        """Weighted history points near each row of ``x`` (a point counts less the farther it lies)."""
        with single_threaded():
            dist, idx = self.nn.kneighbors(self._scaled(x))
        return (self.w[idx] * np.exp(-((dist / self.scale) ** 2))).sum(axis=1)

    def sd(self, x: np.ndarray) -> np.ndarray:
        """The prior's uncertainty at each row of ``x``: ``PRIOR_SD`` where no history is near, shrinking as
        1/sqrt(1 + weighted points near)."""
        return PRIOR_SD / np.sqrt(1.0 + self.density(x))


def _moments(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mu = np.nan_to_num(np.nanmean(x, axis=0)) if len(x) else np.zeros(x.shape[1])
    sd = np.nanstd(x, axis=0) if len(x) else np.ones(x.shape[1])
    return mu, np.where((sd > 0) & np.isfinite(sd), sd, 1.0)


def prior_trust(prior_at: np.ndarray, log_times: np.ndarray, before: float) -> tuple[float, float | None]:
    """(trust, tau): the prior's weight given how it ranks the measured configs (Kendall's tau of its
    predictions against their times, tau/``TAU_FULL`` up to 1), blended with ``before`` (what the history
    earned) as if that were ``TRUST_PSEUDO`` results; 0 when tau <= 0; tau is None (trust ``before``) under 4 results
    or when either side is constant."""
    n = len(log_times)
    if n < 4:
        return before, None
    from scipy.stats import kendalltau

    tau = kendalltau(prior_at, log_times).statistic
    if tau is None or not math.isfinite(tau):
        return before, None
    if tau <= 0:  # no better than chance on this shape's own results: ignored (until it ranks them again)
        return 0.0, float(tau)
    measured = min(1.0, float(tau) / TAU_FULL)
    return (TRUST_PSEUDO * before + n * measured) / (TRUST_PSEUDO + n), float(tau)


class LocalCorrection:
    """The GP: sklearn fits its hyperparameters (every ``REFIT_EVERY`` new results at first, then as the
    data grows by ``REFIT_GROWTH``); the posterior with fixed hyperparameters is numpy (a Cholesky of a
    ~100x100 matrix: sklearn's estimator around it cost ~20 ms per call, most of a proposal's time)."""

    def __init__(self, seed: int | None = None):
        self.seed = seed
        self._kernel: Any = None
        self._fitted_at = -math.inf
        self._post: _Posterior | None = None

    def fit(self, x: np.ndarray, y: np.ndarray) -> None:
        n, d = x.shape
        if self._kernel is None or n - self._fitted_at >= max(REFIT_EVERY, REFIT_GROWTH * self._fitted_at):
            self._kernel = self._optimize(x, y)
            self._fitted_at = n
        self._post = _Posterior(self._kernel, x, y)

    def _optimize(self, x: np.ndarray, y: np.ndarray) -> Any:
        """The hyperparameters, from scratch each time: started from the last optimum, a fit stayed where
        a few results had left it (replayed: 0.5 % -> 5 % mean regret at 80 evaluations)."""
        import warnings

        from sklearn.exceptions import ConvergenceWarning
        from sklearn.gaussian_process import GaussianProcessRegressor
        from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

        start = ConstantKernel(1.0, (1e-3, 1e2)) * Matern(
            length_scale=np.ones(x.shape[1]), length_scale_bounds=(5e-2, 1e2), nu=2.5
        ) + WhiteKernel(1e-2, (1e-5, 1e0))
        gp = GaussianProcessRegressor(start, normalize_y=True, random_state=self.seed or 0)
        with warnings.catch_warnings(), single_threaded():
            warnings.simplefilter("ignore", ConvergenceWarning)
            gp.fit(x, y)
        return gp.kernel_

    def believe(self, x: np.ndarray, y: np.ndarray) -> None:
        """Fit with the current hyperparameters (pending points added with their predicted values)."""
        self._post = _Posterior(self._kernel, x, y)

    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        assert self._post is not None
        return self._post.predict(x)

    def posterior(self) -> _Posterior:
        """The last fit's posterior (its ``sd_given`` conditions on pending points)."""
        assert self._post is not None
        return self._post


class _Posterior:
    """A GP posterior (``ConstantKernel * Matern(nu=2.5) + WhiteKernel`` with fixed hyperparameters, the
    targets normalized as sklearn's ``normalize_y``), as ``GaussianProcessRegressor.predict`` computes it:
    the sd includes the white noise."""

    def __init__(self, kernel: Any, x: np.ndarray, y: np.ndarray):
        self.amp = float(kernel.k1.k1.constant_value)
        self.scale = np.asarray(kernel.k1.k2.length_scale, dtype=float) * np.ones(x.shape[1])
        self.noise = float(kernel.k2.noise_level)
        self.x = np.asarray(x, dtype=float)
        y = np.asarray(y, dtype=float)
        self.y_mean = float(y.mean())
        self.y_sd = float(y.std()) or 1.0
        k = self.cov(self.x, self.x)
        k[np.diag_indices_from(k)] += self.noise + 1e-10  # sklearn's alpha
        with single_threaded():
            self.chol = np.linalg.cholesky(k)
            self.alpha = _cho_solve(self.chol, (y - self.y_mean) / self.y_sd)
        #: the last rows predicted: their covariances with the data, whitened (a batch predicts one pool)
        self._at: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def _with_data(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``k(X, x)`` and ``L^-1 k(X, x)`` (its column sums of squares: what the data explain of each
        row's variance)."""
        if self._at is None or self._at[0] is not x:
            from scipy.linalg import solve_triangular

            k = self.cov(self.x, x)
            with single_threaded():
                self._at = (x, k, solve_triangular(self.chol, k, lower=True, check_finite=False))
        return self._at[1], self._at[2]

    def cov(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """The kernel without its white noise (the covariance of two distinct points)."""
        a, b = a / self.scale, b / self.scale
        with single_threaded():
            d2 = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * a @ b.T
        r = np.sqrt(5.0 * np.maximum(d2, 0.0))
        return self.amp * (1.0 + r + r * r / 3.0) * np.exp(-r)

    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        k, v = self._with_data(x)
        mean = self.alpha @ k
        var = np.maximum(self.amp + self.noise - (v * v).sum(0), 0.0)
        return self.y_mean + self.y_sd * mean, self.y_sd * np.sqrt(var)

    def sd_given(self, x: np.ndarray, pending: np.ndarray) -> np.ndarray:
        """The sd at ``x`` once the rows ``pending`` of ``x`` are measured too, whatever they measure (the
        kriging believer: a pending point counted at its predicted value leaves the mean unchanged and
        shrinks the variance near it), in one solve for every candidate."""
        _, v = self._with_data(x)
        var = self.amp + self.noise - (v * v).sum(0)
        if len(pending):
            with single_threaded():
                c = self.cov(x, x[pending]) - v.T @ v[:, pending]  # posterior covariance with the pending
                cpp = c[pending] + (self.noise + 1e-10) * np.eye(len(pending))
                var = var - (c * np.linalg.solve(cpp, c.T).T).sum(1)
        return self.y_sd * np.sqrt(np.maximum(var, 0.0))


def _cho_solve(chol: np.ndarray, b: np.ndarray) -> np.ndarray:
    from scipy.linalg import cho_solve

    return cho_solve((chol, True), b, check_finite=False)


def standardize(x: np.ndarray) -> np.ndarray:
    """Columns scaled to mean 0, sd 1 (constant columns to 0; NaN, an inactive parameter, to -2)."""
    out = np.array(x, dtype=float)
    mask = np.isnan(out)
    mu = np.nanmean(np.where(mask, np.nan, out), axis=0) if out.size else np.zeros(out.shape[1])
    sd = np.nanstd(np.where(mask, np.nan, out), axis=0) if out.size else np.ones(out.shape[1])
    mu = np.nan_to_num(mu)
    sd = np.where((sd > 0) & np.isfinite(sd), sd, 1.0)
    out = (out - mu) / sd
    out[mask] = -2.0
    keep = np.nanstd(out, axis=0) > 0
    return out[:, keep] if keep.any() else out[:, :1] * 0

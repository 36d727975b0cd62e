"""The ``auto`` strategy's models (scikit-learn, imported only when the strategy is made).

- ``TransferPrior``: gradient-boosted trees (``HistGradientBoostingRegressor``: fast, handles missing
  values, no scaling needed) predicting ``log(time / best time of that shape)`` from a config's parameters,
  the shape's log2 dims and the kernel's analytic features, trained once per shape searched on the other
  shapes' measurements in the store (weighted: other devices and software versions count less).
- ``LocalCorrection``: a Gaussian process on this shape's residuals ``log(time) - prior``, with one length
  scale per column (ARD Matérn 5/2) plus white noise; its hyperparameters are re-fitted only every few
  results (a fit with fixed hyperparameters costs a few ms), so proposing stays far below a measurement."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

#: re-fit the GP's hyperparameters after this many new results (else reuse the last fitted kernel)
REFIT_EVERY = 4


def single_threaded():
    """OpenMP/BLAS limited to one thread: the models are small, and beside compile workers (or on a
    loaded machine) a thread pool per core made one tree fit take 20 s instead of 0.5 s."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(1)


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


class LocalCorrection:
    def __init__(self, seed: int | None = None):
        self.seed = seed
        self._kernel: Any = None
        self._fitted_at = -math.inf
        self._gp: Any = None

    def fit(self, x: np.ndarray, y: np.ndarray) -> None:
        import warnings

        from sklearn.exceptions import ConvergenceWarning
        from sklearn.gaussian_process import GaussianProcessRegressor
        from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

        n, d = x.shape
        refit = self._kernel is None or n - self._fitted_at >= REFIT_EVERY
        if refit:
            kernel = ConstantKernel(1.0, (1e-3, 1e2)) * Matern(
                length_scale=np.ones(d), length_scale_bounds=(5e-2, 1e2), nu=2.5
            ) + WhiteKernel(1e-2, (1e-5, 1e0))
            gp = GaussianProcessRegressor(kernel, normalize_y=True, random_state=self.seed or 0)
        else:
            gp = GaussianProcessRegressor(self._kernel, normalize_y=True, optimizer=None)
        with warnings.catch_warnings(), single_threaded():
            warnings.simplefilter("ignore", ConvergenceWarning)
            gp.fit(x, y)
        if refit:
            self._kernel, self._fitted_at = gp.kernel_, n
        self._gp = gp

    def believe(self, x: np.ndarray, y: np.ndarray) -> None:
        """Fit with the current hyperparameters (pending points added with their predicted values)."""
        from sklearn.gaussian_process import GaussianProcessRegressor

        gp = GaussianProcessRegressor(self._kernel, normalize_y=True, optimizer=None)
        with single_threaded():
            gp.fit(x, y)
        self._gp = gp

    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        with single_threaded():
            mean, sd = self._gp.predict(x, return_std=True)
        return mean, sd


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
